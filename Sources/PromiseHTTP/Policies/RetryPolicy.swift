import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// When and how soon a failed request is sent again.
///
/// The defaults (`RetryPolicy.default`) retry only idempotent methods (`GET`, `HEAD`, `PUT`,
/// `DELETE`, `OPTIONS`), only on connection failures and the statuses 408, 429, 500, 502, 503
/// and 504, at most 3 attempts in all, after the core's `RetryDelay.exponential` backoff with
/// full jitter (a random delay between zero and `0.5 s × 2^(retry − 1)`, capped at 10 s): the
/// same computation as `Promise.retry`, drawing from `generator`.
/// A `Retry-After` header (seconds or an HTTP-date) replaces the backoff, up to
/// `maximumRetryAfter`. No retry starts if it could not start before the request's deadline:
/// the last outcome is delivered instead, at once.
///
/// A client runs its policy (or a request's own) as the last of its `HTTPInterceptor` steps.
public struct RetryPolicy: Sendable {
  /// The most attempts in all, the first one included; 1 means no retry.
  public var maximumAttempts: Int
  /// The methods that may be retried.
  public var retryableMethods: Set<HTTPMethod>
  /// The response statuses that are retried.
  public var retryableStatusCodes: Set<Int>
  /// The transport failures that are retried (connection refused, reset, lost, DNS).
  public var retryableErrorCodes: Set<URLError.Code>
  /// The wait before each retry without a `Retry-After`; `RetryPolicy.defaultBackoff`.
  ///
  /// Any `RetryDelay`: `.constant(.milliseconds(5))` makes the waits exact in tests.
  public var backoff: RetryDelay
  /// The longest `Retry-After` that is honoured; a longer one ends the retries.
  public var maximumRetryAfter: Duration
  /// The randomness of `backoff`'s jitter; `SystemRandomNumberGenerator` by default.
  ///
  /// Every draw advances it, for all the requests that use this policy (and its copies), as
  /// `Promise.retry` draws from one generator for all its attempts: a seeded generator makes the
  /// sequence of delays repeatable, and two requests retrying at once still wait differently.
  /// Reading it gives its current state; setting it starts a new sequence.
  public var generator: any RandomNumberGenerator & Sendable {
    get { jitter.generator }
    set { jitter = JitterSource(newValue) }
  }
  /// The generator every draw of this policy and its copies advances.
  private var jitter: JitterSource
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
    backoff: RetryDelay = RetryPolicy.defaultBackoff,
    maximumRetryAfter: Duration = RetryPolicy.defaultMaximumRetryAfter,
    generator: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.maximumAttempts = maximumAttempts
    self.retryableMethods = retryableMethods
    self.retryableStatusCodes = retryableStatusCodes
    self.retryableErrorCodes = retryableErrorCodes
    self.backoff = backoff
    self.maximumRetryAfter = maximumRetryAfter
    self.jitter = JitterSource(generator)
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

  /// 0.5 s doubling per retry, at most 10 s, with full jitter.
  ///
  /// 0.5 s is long enough for a restarting server, short enough for an interactive user; past
  /// 10 s a user has given up (the deadline usually ends the retries first); the jitter spreads
  /// out clients that failed together.
  public static let defaultBackoff = RetryDelay.exponential(
    initial: .milliseconds(500), multiplier: 2, maximum: .seconds(10), jitter: .full)

  /// 60 s: a server asking for more is down for maintenance; better to report it.
  public static let defaultMaximumRetryAfter: Duration = .seconds(60)

  /// Returns whether `method` may be retried at all.
  public func allowsRetry(of method: HTTPMethod) -> Bool {
    maximumAttempts > 1 && retryableMethods.contains(method)
  }

  /// Returns the delay before retry number `retry` (1 for the first retry), or `nil` for none.
  ///
  /// With a `Retry-After` value (`"120"` or `"Fri, 31 Dec 1999 23:59:59 GMT"`) that delay is
  /// used, if not longer than `maximumRetryAfter`; a past date means "now". Otherwise it is
  /// `backoff`'s delay before that retry, its jitter drawn from `generator`, which advances.
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
    return jitter.duration(of: backoff, beforeRetry: retry)
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
        return .clampedSeconds(date.timeIntervalSince(now))
      }
    }
    return nil
  }

  /// IMF-fixdate, then the obsolete RFC 850 and asctime forms that RFC 9110 still requires.
  private static let httpDateFormats = [
    "EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy",
  ]
}

extension RetryPolicy: HTTPInterceptor {
  /// Returns `.retry(after:)` for a retryable outcome while attempts remain, else `.proceed`.
  ///
  /// Retryable: a method in `retryableMethods`, and a status in `retryableStatusCodes` that is
  /// not acceptable, or a transport failure in `retryableErrorCodes`. The client refuses a
  /// retry that could not start before the deadline.
  public func decide(
    _ outcome: Result<HTTPResponse, HTTPError>, for request: URLRequest, attempt: HTTPAttempt
  ) -> Promise<HTTPDecision> {
    Promise(decision(for: outcome, attempt: attempt))
  }

  /// The decision of `decide`, as a value.
  func decision(for outcome: Result<HTTPResponse, HTTPError>, attempt: HTTPAttempt) -> HTTPDecision {
    guard allowsRetry(of: attempt.method) else { return .proceed }
    let retryAfter: String?
    switch outcome {
    case .success(let response)
    where retryableStatusCodes.contains(response.statusCode)
      && !attempt.acceptableStatusCodes.contains(response.statusCode):
      retryAfter = response.headers["Retry-After"]
    case .failure(.transport(let error, _)) where retryableErrorCodes.contains(error.code):
      retryAfter = nil
    default:
      return .proceed
    }
    guard let delay = delay(beforeRetry: attempt.number, retryAfter: retryAfter) else { return .proceed }
    return .retry(after: delay)
  }
}

/// The generator of a `RetryPolicy`, shared by its copies so that every draw advances it.
///
/// A policy is a value copied into each request; with the generator stored in it, every request
/// drew from its own copy, and a seeded generator gave every request the same jitter — a herd of
/// clients built from one seed retried in step.
private final class JitterSource: Sendable {
  /// The generator, advanced under the lock so that two requests never draw the same numbers.
  ///
  /// A draw calls the generator's `next()`, user code when the user supplies the generator,
  /// with the lock held: the draw must advance the one shared state atomically.
  private let state: LockedBox<any RandomNumberGenerator & Sendable>

  init(_ generator: any RandomNumberGenerator & Sendable) {
    state = LockedBox(generator)
  }

  /// The generator's current state.
  var generator: any RandomNumberGenerator & Sendable {
    state.load()
  }

  /// Returns `backoff`'s delay before retry number `retry`, drawing any jitter from the generator.
  func duration(of backoff: RetryDelay, beforeRetry retry: Int) -> Duration {
    state.withLock { backoff.duration(beforeRetry: retry, using: &$0) }
  }
}
