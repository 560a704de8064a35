import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// When and how soon a failed request is sent again.
///
/// The defaults (`RetryPolicy.default`) retry only idempotent methods (`GET`, `HEAD`, `PUT`,
/// `DELETE`, `OPTIONS`), only on connection failures and the statuses 408, 429, 500, 502, 503
/// and 504, at most 3 attempts in all, after an exponential backoff with full jitter
/// (a random delay between zero and `baseDelay × 2^(retry − 1)`, capped at `maximumDelay`).
/// A `Retry-After` header (seconds or an HTTP-date) replaces the backoff, up to
/// `maximumRetryAfter`. No retry starts if it could not finish before the request's deadline:
/// the last error is reported instead.
public struct RetryPolicy: Sendable {
  /// The most attempts in all, the first one included; 1 means no retry.
  public var maximumAttempts: Int
  /// The methods that may be retried.
  public var retryableMethods: Set<HTTPMethod>
  /// The response statuses that are retried.
  public var retryableStatusCodes: Set<Int>
  /// The transport failures that are retried (connection refused, reset, lost, DNS).
  public var retryableErrorCodes: Set<URLError.Code>
  /// The backoff before the first retry is drawn from `0...baseDelay`; it doubles per retry.
  public var baseDelay: Duration
  /// The longest backoff, whatever the retry number.
  public var maximumDelay: Duration
  /// The longest `Retry-After` that is honoured; a longer one ends the retries.
  public var maximumRetryAfter: Duration
  /// Returns a random number in the range given: the jitter.
  ///
  /// Tests inject a fixed one.
  public var random: @Sendable (ClosedRange<Double>) -> Double
  /// Returns the current date, to read an HTTP-date `Retry-After`.
  ///
  /// Tests inject a fixed one.
  public var now: @Sendable () -> Date

  /// Creates a policy; every parameter defaults to the documented default.
  public init(
    maximumAttempts: Int = RetryPolicy.defaultMaximumAttempts,
    retryableMethods: Set<HTTPMethod> = RetryPolicy.defaultRetryableMethods,
    retryableStatusCodes: Set<Int> = RetryPolicy.defaultRetryableStatusCodes,
    retryableErrorCodes: Set<URLError.Code> = RetryPolicy.defaultRetryableErrorCodes,
    baseDelay: Duration = RetryPolicy.defaultBaseDelay,
    maximumDelay: Duration = RetryPolicy.defaultMaximumDelay,
    maximumRetryAfter: Duration = RetryPolicy.defaultMaximumRetryAfter,
    random: @escaping @Sendable (ClosedRange<Double>) -> Double = { Double.random(in: $0) },
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.maximumAttempts = maximumAttempts
    self.retryableMethods = retryableMethods
    self.retryableStatusCodes = retryableStatusCodes
    self.retryableErrorCodes = retryableErrorCodes
    self.baseDelay = baseDelay
    self.maximumDelay = maximumDelay
    self.maximumRetryAfter = maximumRetryAfter
    self.random = random
    self.now = now
  }

  /// The policy with every default.
  public static let `default` = RetryPolicy()

  /// A policy that never retries.
  public static let none = RetryPolicy(maximumAttempts: 1)

  /// 3 attempts: one retry rides out a blip, a second a short restart; more only adds load
  /// to a server that is already struggling.
  public static let defaultMaximumAttempts = 3

  /// The idempotent methods (RFC 9110, 9.2.2): repeating them cannot do something twice.
  ///
  /// `POST` and `PATCH` are not retried, because the first attempt may have taken effect.
  public static let defaultRetryableMethods: Set<HTTPMethod> = [.get, .head, .put, .delete, .options]

  /// 408, 429, 500, 502, 503 and 504: the statuses that say "try again later".
  ///
  /// Other 4xx are the client's fault and fail the same way again.
  public static let defaultRetryableStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504]

  /// Failures to connect, or a connection lost before the response ended.
  ///
  /// Refused, reset, closed, DNS. Not TLS failures (retrying does not fix a certificate) and not cancellation.
  public static let defaultRetryableErrorCodes: Set<URLError.Code> = [
    .cannotConnectToHost, .networkConnectionLost, .cannotFindHost, .dnsLookupFailed,
    .notConnectedToInternet, .badServerResponse, .zeroByteResource,
  ]

  /// 0.5 s: long enough for a restarting server, short enough for an interactive user.
  public static let defaultBaseDelay: Duration = .milliseconds(500)

  /// 10 s: past this a user has given up; the deadline usually ends the retries first.
  public static let defaultMaximumDelay: Duration = .seconds(10)

  /// 60 s: a server asking for more is down for maintenance; better to report it.
  public static let defaultMaximumRetryAfter: Duration = .seconds(60)

  /// Returns whether `method` may be retried at all.
  public func allowsRetry(of method: HTTPMethod) -> Bool {
    maximumAttempts > 1 && retryableMethods.contains(method)
  }

  /// Returns the delay before retry number `retry` (1 for the first retry), or `nil` for none.
  ///
  /// With a `Retry-After` value (`"120"` or `"Fri, 31 Dec 1999 23:59:59 GMT"`) that delay is
  /// used, if not longer than `maximumRetryAfter`; a past date means "now". Otherwise the
  /// delay is random in `0...min(maximumDelay, baseDelay × 2^(retry − 1))` (full jitter).
  ///
  /// - Parameters:
  ///   - retry: The number of the retry about to happen, from 1.
  ///   - retryAfter: The response's `Retry-After` header value, if any.
  /// - Returns: The delay, or `nil` when the policy allows no more retries.
  public func delay(beforeRetry retry: Int, retryAfter: String? = nil) -> Duration? {
    guard retry >= 1, retry < maximumAttempts else { return nil }
    if let retryAfter, let requested = Self.parseRetryAfter(retryAfter, now: now()) {
      return requested <= maximumRetryAfter ? requested : nil
    }
    let exponent = Double(min(retry - 1, 62))
    let ceiling = min(maximumDelay.secondsValue, baseDelay.secondsValue * pow(2, exponent))
    let seconds = max(0, min(ceiling, random(0...max(0, ceiling))))
    return .nanoseconds(Int64((seconds * 1e9).rounded()))
  }

  /// Parses a `Retry-After` value: delay-seconds or an HTTP-date (RFC 9110, 10.2.3).
  ///
  /// - Returns: The delay from `now`; zero for a date in the past; `nil` when unreadable.
  public static func parseRetryAfter(_ value: String, now: Date) -> Duration? {
    let trimmed = value.trimmingCharacters(in: .whitespaces)
    if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
      return Int64(trimmed).map { .seconds($0) } ?? nil
    }
    for format in httpDateFormats {
      let formatter = DateFormatter()
      formatter.locale = Locale(identifier: "en_US_POSIX")
      formatter.timeZone = TimeZone(identifier: "GMT")
      formatter.dateFormat = format
      if let date = formatter.date(from: trimmed) {
        let seconds = max(0, date.timeIntervalSince(now))
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
      }
    }
    return nil
  }

  /// IMF-fixdate, then the obsolete RFC 850 and asctime forms that RFC 9110 still requires.
  private static let httpDateFormats = [
    "EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy",
  ]
}
