import Dispatch
import Foundation

/// Supplies the timers of the time-based combinators: `delay`, `timeout`, `retry`, `after`.
///
/// Every combinator that waits takes a `scheduler:` parameter, which defaults to
/// `PromiseSchedulers.default` (real time, `DispatchTimeScheduler`, unless you change it).
/// Pass a `VirtualTimeScheduler` in tests to run timers instantly and deterministically.
///
/// To write your own (for example on top of an event loop), run `work` once on `queue` after
/// `delay`, and make the returned handle's `cancel()` drop `work` — and release it, with
/// everything it captured — if it has not started yet.
public protocol PromiseScheduler: Sendable {
  /// Schedules `work` to run once on `queue` after `delay`; returns a handle that cancels it.
  ///
  /// A zero or negative `delay` runs `work` as soon as possible, but still asynchronously:
  /// never before this call returns.
  ///
  /// - Parameters:
  ///   - delay: How long to wait, measured by this scheduler's clock.
  ///   - queue: Where `work` runs.
  ///   - work: The work; released after it has run or when it is cancelled.
  /// - Returns: A handle whose `cancel()` drops `work` if it has not started.
  @discardableResult
  func schedule(
    after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void
  ) -> any ScheduledWork

  /// Returns the current time on this scheduler's clock, measured from an origin of its own.
  ///
  /// Only differences between two readings mean something: code that checks whether some
  /// work still fits before a timer of this scheduler fires (PromiseHTTP's retry before a
  /// deadline) subtracts readings. The default implementation reads the monotonic clock
  /// (`DispatchTime`), right for any scheduler whose timers run in real time;
  /// `VirtualTimeScheduler` returns its virtual time. Implement it when your timers run on a
  /// clock of their own, so that readings agree with them.
  var now: Duration { get }
}

extension PromiseScheduler {
  /// Returns the monotonic clock's reading (`DispatchTime.now()`), for real-time schedulers.
  public var now: Duration {
    .nanoseconds(Int64(clamping: DispatchTime.now().uptimeNanoseconds))
  }
}

/// Identifies work scheduled on a `PromiseScheduler`, so that it can be cancelled.
public protocol ScheduledWork: Sendable {
  /// Cancels the work: drops it, and releases what it captured, unless it has already started.
  ///
  /// Safe to call from any thread, any number of times, before or after the work has run.
  func cancel()
}

// MARK: - Internal helpers
