import Dispatch
import Foundation

/// Describes how long `Promise.retry` waits before each new attempt.
///
/// `.none` retries at once, `.constant(d)` waits `d` every time, and `.exponential(…)` waits
/// `initial`, then `initial × multiplier`, `initial × multiplier²`, … capped at `maximum`,
/// optionally with full jitter (a uniformly random wait between zero and that value, which
/// spreads out clients that failed together). Waits are measured by the retry's scheduler.
public struct RetryDelay: Sendable, Hashable, CustomStringConvertible {
  /// Chooses how much randomness an exponential delay adds.
  public enum Jitter: Sendable, Hashable {
    /// Waits exactly the computed delay.
    case none
    /// Waits a uniformly random time in `0...computed delay` ("full jitter").
    case full
  }

  enum Kind: Hashable {
    case none
    case constant(Duration)
    case exponential(initial: Duration, multiplier: Double, maximum: Duration, jitter: Jitter)
  }

  let kind: Kind

  /// Retries at once, without waiting (and without involving the scheduler).
  public static let none = RetryDelay(kind: .none)

  /// Returns a delay that waits the same `delay` before every retry.
  ///
  /// - Parameter delay: The wait before each retry; a zero or negative value retries at once.
  /// - Returns: A constant delay.
  public static func constant(_ delay: Duration) -> RetryDelay {
    RetryDelay(kind: .constant(max(delay, .zero)))
  }

  /// Returns a delay that grows geometrically: `initial × multiplier^(retry − 1)`, capped.
  ///
  /// With `jitter: .full` each wait is instead drawn uniformly from zero to that value, using
  /// the random number generator given to `Promise.retry`. The cap applies before jitter, so
  /// no wait ever exceeds `maximum`.
  ///
  /// - Parameters:
  ///   - initial: The wait before the first retry.
  ///   - multiplier: The growth factor from one retry to the next; must be finite and positive.
  ///   - maximum: The longest wait; 30 seconds by default.
  ///   - jitter: `.none` (default) for exact waits, `.full` for randomised ones.
  /// - Returns: An exponential delay.
  public static func exponential(
    initial: Duration, multiplier: Double = 2, maximum: Duration = .seconds(30),
    jitter: Jitter = .none
  ) -> RetryDelay {
    precondition(
      multiplier.isFinite && multiplier > 0,
      "RetryDelay.exponential: multiplier must be finite and positive, got \(multiplier)")
    let initial = max(initial, .zero)
    return RetryDelay(
      kind: .exponential(
        initial: initial, multiplier: multiplier, maximum: max(maximum, .zero), jitter: jitter))
  }

  /// Returns the wait before retry number `retry` (1 for the wait before the second attempt).
  ///
  /// Deterministic unless the delay uses `.full` jitter, which draws from `generator`.
  ///
  /// - Parameters:
  ///   - retry: The retry's number, from 1.
  ///   - generator: The source of randomness for jitter.
  /// - Returns: How long to wait; `.zero` means retry at once.
  public func duration(
    beforeRetry retry: Int, using generator: inout some RandomNumberGenerator
  ) -> Duration {
    switch kind {
    case .none:
      return .zero
    case .constant(let delay):
      return delay
    case .exponential(let initial, let multiplier, let maximum, let jitter):
      let capNanoseconds = maximum.nanosecondsValue
      let computedNanoseconds =
        initial.nanosecondsValue * pow(multiplier, Double(max(retry, 1) - 1))
      let computed: Duration
      let computedValue: Double
      if !computedNanoseconds.isFinite || computedNanoseconds >= capNanoseconds {
        computed = maximum
        computedValue = capNanoseconds
      } else {
        computed = .nanoseconds(Int64(computedNanoseconds.rounded()))
        computedValue = computedNanoseconds
      }
      switch jitter {
      case .none:
        return computed
      case .full:
        guard computedValue > 0 else { return .zero }
        let drawn = Double.random(in: 0...computedValue, using: &generator)
        return min(.nanoseconds(Int64(drawn.rounded(.down))), computed)
      }
    }
  }

  /// Returns the wait before retry number `retry`, drawing any jitter from the system generator.
  ///
  /// - Parameter retry: The retry's number, from 1.
  /// - Returns: How long to wait; `.zero` means retry at once.
  public func duration(beforeRetry retry: Int) -> Duration {
    var generator = SystemRandomNumberGenerator()
    return duration(beforeRetry: retry, using: &generator)
  }

  /// Describes the delay: `none`, `constant(1.0 seconds)` or `exponential(initial: …, …)`.
  public var description: String {
    switch kind {
    case .none:
      return "none"
    case .constant(let delay):
      return "constant(\(delay))"
    case .exponential(let initial, let multiplier, let maximum, let jitter):
      return
        "exponential(initial: \(initial), multiplier: \(multiplier), maximum: \(maximum), jitter: \(jitter))"
    }
  }
}
