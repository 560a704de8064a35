import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A step every request of a client goes through: it can adapt the request, decide what an
/// outcome means, and observe what happens.
///
/// A client runs an ordered list of steps for each request: its `authenticator` (if any), the
/// `interceptors` of its configuration in order, then the request's `RetryPolicy`. For each
/// attempt:
/// 1. `adapt(_:for:)` runs on every step in order, each on the previous step's request;
/// 2. the request is sent;
/// 3. `decide(_:for:attempt:)` runs on the steps in order until one returns something other
///    than `.proceed`: that decision applies (see `HTTPDecision`); if all proceed, an acceptable
///    status fulfils the promise and anything else rejects it.
///
/// `observe(_:)` sees every event of the request, on every step. All three have defaults that
/// do nothing, so a step implements only what it needs. Steps run on the client's
/// `callbackQueue`, never under a lock; `adapt` and `decide` return promises, so a step may
/// do asynchronous work (fetch a token). A step's rejected promise ends the request with that
/// error. The request's deadline keeps running while a step works.
public protocol HTTPInterceptor: Sendable {
  /// Returns the request to send for `attempt`, adapted (a header added, a token attached).
  ///
  /// - Parameters:
  ///   - request: The request as the previous step left it.
  ///   - attempt: Which attempt this is, and how much time is left.
  /// - Returns: A promise of the request to pass on; a rejection ends the request.
  func adapt(_ request: URLRequest, for attempt: HTTPAttempt) -> Promise<URLRequest>

  /// Returns what to do with the outcome of one attempt: `.proceed` leaves it to the next step.
  ///
  /// The outcome is the response whatever its status (a 503 or a 401 is a `.success` here), or
  /// the transport's failure.
  ///
  /// - Parameters:
  ///   - outcome: The response, or the `HTTPError` of the exchange.
  ///   - request: The request that was sent, as adapted.
  ///   - attempt: Which attempt this was.
  /// - Returns: A promise of the decision; a rejection ends the request with its error.
  func decide(
    _ outcome: Result<HTTPResponse, HTTPError>, for request: URLRequest, attempt: HTTPAttempt
  ) -> Promise<HTTPDecision>

  /// Observes one event of a request: sent, answered, failed, backing off, finished.
  ///
  /// Runs on the client's `callbackQueue` and must return quickly; it cannot change anything.
  func observe(_ event: HTTPEvent)
}

extension HTTPInterceptor {
  /// Returns `request` unchanged.
  public func adapt(_ request: URLRequest, for attempt: HTTPAttempt) -> Promise<URLRequest> {
    Promise(request)
  }

  /// Returns `.proceed`: no opinion.
  public func decide(
    _ outcome: Result<HTTPResponse, HTTPError>, for request: URLRequest, attempt: HTTPAttempt
  ) -> Promise<HTTPDecision> {
    Promise(.proceed)
  }

  /// Does nothing.
  public func observe(_ event: HTTPEvent) {}
}

/// The attempt an `HTTPInterceptor` is looking at.
public struct HTTPAttempt: Sendable, Hashable {
  /// The attempt's number, from 1; a retry is a new attempt, a replay is not.
  public let number: Int
  /// How many times the request has been replayed (`HTTPDecision.replay`) so far.
  public let replays: Int
  /// The request's method.
  public let method: HTTPMethod
  /// The statuses that fulfil the request's promise.
  public let acceptableStatusCodes: Range<Int>
  /// The time left before the request's deadline, on the client's scheduler.
  public let remaining: Duration

  /// Creates an attempt description; the client makes these, tests of a step may too.
  public init(
    number: Int, replays: Int = 0, method: HTTPMethod, acceptableStatusCodes: Range<Int> = 200..<300,
    remaining: Duration
  ) {
    self.number = number
    self.replays = replays
    self.method = method
    self.acceptableStatusCodes = acceptableStatusCodes
    self.remaining = remaining
  }
}

/// What an `HTTPInterceptor` decides about the outcome of an attempt.
public enum HTTPDecision: Sendable {
  /// No opinion: the next step decides (after the last, the status decides).
  case proceed
  /// Settle with this outcome now: fulfil if the status is acceptable, else reject.
  case deliver
  /// Send a new attempt after `after`; refused, and the outcome delivered, if it could not
  /// start before the deadline.
  case retry(after: Duration)
  /// Send the request again at once, through every `adapt` again, without counting an attempt
  /// (after refreshing a credential). At most `HTTPDecision.maximumReplays` per request.
  case replay
  /// End the request with `error`.
  case fail(any Error)

  /// 3: more replays than that mean a step keeps asking for the same thing; the outcome is then
  /// delivered.
  public static let maximumReplays = 3
}

/// One event of a request, as `HTTPInterceptor.observe(_:)` sees it.
public enum HTTPEvent: Sendable {
  /// The request is about to be sent (after every `adapt`).
  case willSend(URLRequest, HTTPAttempt)
  /// A response arrived, whatever its status.
  case didReceive(HTTPResponse, HTTPAttempt)
  /// The exchange failed before a response arrived.
  case didFail(HTTPError, HTTPAttempt)
  /// A new attempt starts after `delay`.
  case willRetry(after: Duration, HTTPAttempt)
  /// The request settled its promise with this outcome.
  case didFinish(Result<HTTPResponse, any Error>)
}
