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
    let timer = DispatchTimerWork(work)
    let source = DispatchSource.makeTimerSource(queue: queue)
    timer.start(source, deadline: delay.dispatchDeadline)
    return timer
  }
}

/// The work and the source of one `DispatchTimeScheduler` timer.
///
/// The source's event handler holds this object, which holds the source: the cycle lasts until
/// the timer fires or is cancelled, when `source` is cancelled (Dispatch then releases the
/// handler) and both references are dropped.
private final class DispatchTimerWork: ScheduledWork, @unchecked Sendable {
  // Safety: `work` and `source` are only accessed while `lock` is held.
  private let lock = NSLock()
  private var work: (@Sendable () -> Void)?
  private var source: (any DispatchSourceTimer)?

  init(_ work: @escaping @Sendable () -> Void) {
    self.work = work
  }

  func start(_ source: any DispatchSourceTimer, deadline: DispatchTime) {
    lock.withLock { self.source = source }
    source.setEventHandler { [self] in fire() }
    source.schedule(deadline: deadline, leeway: .nanoseconds(0))
    source.resume()
  }

  private func fire() {
    let (work, source) = take()
    source?.cancel()
    work?()
  }

  func cancel() {
    let (_, source) = take()
    source?.cancel()
  }

  private func take() -> ((@Sendable () -> Void)?, (any DispatchSourceTimer)?) {
    lock.withLock {
      defer {
        work = nil
        source = nil
      }
      return (work, source)
    }
  }
}
