import Dispatch
import Foundation

/// One timer of a combinator: holds the work itself, so disarming releases it at once.
///
/// The scheduler only ever holds this small object, never the combinator's state, so even a
/// scheduler whose `cancel()` is lazy cannot keep a settled promise (or what a retry factory
/// captured) alive. `fire` and `disarm` may race: whichever comes first wins, the other does
/// nothing. A slot is used once.
final class TimerSlot: Sendable {
  private let state = LockedBox(State())

  private struct State: Sendable {
    var work: (@Sendable () -> Void)?
    var handle: (any ScheduledWork)?
    var isDone = false
  }

  init() {}

  /// Schedules `work` on `scheduler`; does nothing if the slot was disarmed already.
  func start(
    after delay: Duration, on queue: DispatchQueue, scheduler: any PromiseScheduler,
    _ work: @escaping @Sendable () -> Void
  ) {
    let started: Bool = state.withLock { state in
      guard !state.isDone, state.work == nil else { return false }
      state.work = work
      return true
    }
    guard started else { return }
    let handle = scheduler.schedule(after: delay, on: queue) { [self] in fire() }
    let keep: Bool = state.withLock { state in
      guard !state.isDone else { return false }
      state.handle = handle
      return true
    }
    if !keep { handle.cancel() }
  }

  /// Runs the work unless the slot was disarmed.
  private func fire() {
    let work: (@Sendable () -> Void)? = state.withLock { state in
      defer {
        state.work = nil
        state.handle = nil
        state.isDone = true
      }
      return state.work
    }
    work?()
  }

  /// Cancels the timer (if started) and releases the work; the work will not run.
  func disarm() {
    let (handle, work): ((any ScheduledWork)?, (@Sendable () -> Void)?) = state.withLock { state in
      defer {
        state.work = nil
        state.handle = nil
        state.isDone = true
      }
      return (state.handle, state.work)
    }
    handle?.cancel()
    // Released after unlocking: what the work captures may run user code in its deinit.
    _ = work
  }
}
