import Dispatch
import Foundation

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
