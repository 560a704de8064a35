/// What a client does with a redirect: a 3xx response with a `Location` to go to.
///
/// Followed hops keep the rules of `HTTPClient`: a hop to another scheme, host or port loses the
/// client's `sensitiveHeaders`, a loop rejects with `HTTPError.tooManyRedirects`, and a hop to a
/// scheme other than `http` or `https` (`file:`, `data:`, …) is refused with
/// `HTTPError.invalidRequest` before anything is sent to it.
///
/// With `doNotFollow` the 3xx response is the answer. It goes through status validation like any
/// other: outside `acceptableStatusCodes` (200–299 by default) it rejects with
/// `HTTPError.unacceptableStatus`, which carries the status and the `Location` header. To receive
/// it as a response, accept redirect statuses too, for the client or for one request:
/// `HTTPRequest(path: "short/link", acceptableStatusCodes: 200..<400, redirectPolicy: .doNotFollow)`.
///
/// A 3xx without a usable `Location` (missing, empty, not a URL) is never followed, whatever
/// the policy: it is the answer, as with `doNotFollow`.
public enum RedirectPolicy: Sendable, Hashable {
  /// Follows at most `maximum` redirects per request; one more rejects with
  /// `HTTPError.tooManyRedirects`, as does a redirect back to a URL already visited.
  case follow(maximum: Int)
  /// Follows no redirect: the 3xx response itself is the answer.
  case doNotFollow

  /// Follows at most 10 redirects (`HTTPClient.defaultMaximumRedirects`).
  public static let `default` = RedirectPolicy.follow(maximum: defaultMaximum)

  /// 10: `HTTPClient.defaultMaximumRedirects`, where its rationale is.
  static let defaultMaximum = 10

  /// The most redirects followed: the maximum of `follow`, 0 for `doNotFollow`.
  public var maximumRedirects: Int {
    switch self {
    case .follow(let maximum): max(0, maximum)
    case .doNotFollow: 0
    }
  }
}
