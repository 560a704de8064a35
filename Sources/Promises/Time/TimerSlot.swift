import Dispatch
import Foundation

/// One timer of a combinator: holds the work itself, so disarming releases it at once.
///
/// The scheduler only ever holds this small object, never the combinator's state, so even a
/// scheduler whose `cancel()` is lazy cannot keep a settled promise (or what a retry factory
/// captured) alive. `fire` and `disarm` may race: whichever comes first wins, the other does
/// nothing. A slot is used once.
final class TimerSlot: @unchecked Sendable {
  // Safety: `work`, `handle` and `isDone` are only accessed while `lock` is held.
  private let lock = NSLock()
  private var work: (@Sendable () -> Void)?
  private var handle: (any ScheduledWork)?
  private var isDone = false

  init() {}

  /// Schedules `work` on `scheduler`; does nothing if the slot was disarmed already.
  func start(
    after delay: Duration, on queue: DispatchQueue, scheduler: any PromiseScheduler,
    _ work: @escaping @Sendable () -> Void
  ) {
    let started: Bool = lock.withLock {
      guard !isDone, self.work == nil else { return false }
      self.work = work
      return true
    }
    guard started else { return }
    let handle = scheduler.schedule(after: delay, on: queue) { [self] in fire() }
    let keep: Bool = lock.withLock {
      guard !isDone else { return false }
      self.handle = handle
      return true
    }
    if !keep { handle.cancel() }
  }

  /// Runs the work unless the slot was disarmed.
  private func fire() {
    let work: (@Sendable () -> Void)? = lock.withLock {
      defer {
        self.work = nil
        handle = nil
        isDone = true
      }
      return self.work
    }
    work?()
  }

  /// Cancels the timer (if started) and releases the work; the work will not run.
  func disarm() {
    let handle: (any ScheduledWork)? = lock.withLock {
      defer {
        work = nil
        self.handle = nil
        isDone = true
      }
      return self.handle
    }
    handle?.cancel()
  }
}
