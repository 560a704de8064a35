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

/// Holds the scheduler that time-based combinators use when no `scheduler:` is passed.
public enum PromiseSchedulers {
  private static let storage = LockedScheduler(DispatchTimeScheduler())

  /// Gets or sets the scheduler used when no `scheduler:` is given; `DispatchTimeScheduler()` at first.
  ///
  /// Thread-safe to read and set. It is read when a combinator is called, so a change applies to
  /// combinators called afterwards; timers already scheduled keep their scheduler. Setting it
  /// affects every caller in the process (including libraries): in tests, prefer passing
  /// `scheduler:` explicitly over replacing the default.
  public static var `default`: any PromiseScheduler {
    get { storage.get() }
    set { storage.set(newValue) }
  }
}

/// A lock-protected scheduler reference.
private final class LockedScheduler: @unchecked Sendable {
  // Safety: `value` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var value: any PromiseScheduler

  init(_ value: any PromiseScheduler) {
    self.value = value
  }

  func get() -> any PromiseScheduler {
    lock.withLock { value }
  }

  func set(_ newValue: any PromiseScheduler) {
    lock.withLock { value = newValue }
  }
}

// MARK: - Internal helpers

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

/// The one set of `Duration` conversions of both modules (`package`: PromiseHTTP uses them too).
extension Duration {
  /// The duration in nanoseconds, clamped to `0...Int64.max`.
  package var clampedNanoseconds: Int64 {
    let (seconds, attoseconds) = components
    if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
    let (wholeNanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return .max }
    let (total, overflow2) = wholeNanoseconds.addingReportingOverflow(attoseconds / 1_000_000_000)
    return overflow2 ? .max : total
  }

  /// The end of the library's clocks: `Int64.max` seconds, about 292 billion years.
  package static var endOfTime: Duration { .seconds(Int64.max) }

  /// `self + other`, saturating at `endOfTime` (or at `self`, if that is later) instead of
  /// overflowing: the clocks that add durations (`VirtualTimeScheduler`, PromiseHTTP's
  /// request deadlines) take "practically never" durations as they come.
  package func saturatingAdding(_ other: Duration) -> Duration {
    let end = Duration.endOfTime
    if self >= end || other >= end - self { return other > .zero ? max(self, end) : self + other }
    return self + other
  }

  /// The duration in nanoseconds, as a `Double` (negative durations included).
  package var nanosecondsValue: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
  }

  /// The duration in seconds, as a `Double` (negative durations included).
  package var secondsValue: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }

  /// A duration of `seconds`, rounded down to the nanosecond: NaN and negative values are zero,
  /// and values too large for a `Duration` of nanoseconds saturate at `Int64.max` seconds.
  package static func clampedSeconds(_ seconds: Double) -> Duration {
    let seconds = seconds.isNaN ? 0 : max(0, seconds)
    return seconds >= 9e9 ? .seconds(Int64.max) : .nanoseconds(Int64((seconds * 1e9).rounded(.down)))
  }

  /// The Dispatch deadline this far from now; `.distantFuture` ("never") when it does not fit.
  ///
  /// The one conversion of a duration to a Dispatch deadline: every real-time timer (`after`,
  /// `delay`, `timeout`, `retry`, PromiseHTTP's deadlines) and `wait` go through it, so a
  /// "practically never" duration means never everywhere.
  package var dispatchDeadline: DispatchTime {
    let nanoseconds = UInt64(clampedNanoseconds)
    let now = DispatchTime.now().uptimeNanoseconds
    // libdispatch reads the top two bits of a deadline as its clock (bit 63: the wall clock,
    // bit 62: another monotonic clock), so an uptime at or past 2^62 ns (about 146 years of
    // uptime) is not a far-away time but another clock's: measured on Linux, a timer at 2^63
    // fires at once, a semaphore wait until 2^62 returns at once. Such deadlines are never.
    let limit = Self.dispatchUptimeLimit
    guard now < limit, nanoseconds < limit - now else { return .distantFuture }
    return DispatchTime(uptimeNanoseconds: now + nanoseconds)
  }

  /// The first uptime that libdispatch would not read as one (see `dispatchDeadline`).
  private static var dispatchUptimeLimit: UInt64 { 1 << 62 }
}
