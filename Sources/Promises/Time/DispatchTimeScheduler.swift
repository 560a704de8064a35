import Dispatch
import Foundation

/// Schedules work in real time on Dispatch timers (`DispatchSourceTimer`, monotonic clock).
///
/// The default scheduler. A cancelled timer is removed from Dispatch at once and its work is
/// released; a timer that has fired is released after its work has run.
public struct DispatchTimeScheduler: PromiseScheduler {
  /// Creates a real-time scheduler.
  public init() {}

  /// Schedules `work` on `queue` after `delay` of real (monotonic) time.
  ///
  /// - Parameters:
  ///   - delay: How long to wait; zero or negative means as soon as possible.
  ///   - queue: Where `work` runs.
  ///   - work: The work; released after it has run or when it is cancelled.
  /// - Returns: A handle whose `cancel()` stops the timer and releases `work`.
  @discardableResult
  public func schedule(
    after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void
  ) -> any ScheduledWork {
    let timer = DispatchTimerWork(work, on: queue)
    timer.start(deadline: delay.dispatchDeadline)
    return timer
  }
}

/// The work and the source of one `DispatchTimeScheduler` timer.
///
/// The source's event handler holds this object, which holds the source: the cycle lasts until
/// the timer fires or is cancelled, when `source` is cancelled and Dispatch releases the
/// handler.
private final class DispatchTimerWork: ScheduledWork, Sendable {
  /// The work until the timer fires or is cancelled: whichever comes first takes it, the
  /// other finds nothing to run or release.
  private let work: LockedBox<(@Sendable () -> Void)?>
  // Safety of `nonisolated(unsafe)`: the reference is a constant and a dispatch source is
  // thread-safe (`cancel` may be called from any thread, any number of times);
  // swift-corelibs-libdispatch just does not declare `DispatchSourceTimer` `Sendable`.
  private nonisolated(unsafe) let source: any DispatchSourceTimer

  init(_ work: @escaping @Sendable () -> Void, on queue: DispatchQueue) {
    self.work = LockedBox(work)
    source = DispatchSource.makeTimerSource(queue: queue)
  }

  func start(deadline: DispatchTime) {
    source.setEventHandler { [self] in fire() }
    source.schedule(deadline: deadline, leeway: .nanoseconds(0))
    source.resume()
  }

  private func fire() {
    let work = work.exchange(nil)
    source.cancel()
    work?()
  }

  func cancel() {
    // Released after unlocking: what the work captures may run user code in its deinit.
    let work = work.exchange(nil)
    source.cancel()
    _ = work
  }
}
