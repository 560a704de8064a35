import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Every error an `HTTPClient` request can end with, each case carrying what went wrong.
///
/// Match a case with `catch HTTPError.timedOut` or `if case .unacceptableStatus(let status, …)`.
/// No case carries a credential: URLs are stored without user-info, the values of the client's
/// `sensitiveHeaders` (`Authorization`, `Cookie`, `X-Api-Key`, … by default) are stored
/// redacted, and so `description`, `String(reflecting:)` and `dump` are safe to log. Cancelling a
/// request rejects it with Swift's `CancellationError`, not with an `HTTPError`.
public enum HTTPError: Error, Sendable {
  /// The connection failed: refused, reset, closed early, DNS, TLS. Carries the `URLError`.
  ///
  /// Its `localizedDescription` is FoundationNetworking's message when it gave one ("SSL
  /// certificate problem: self-signed certificate"), with credentials removed; a TLS failure has
  /// a TLS code (`.serverCertificateUntrusted`, `.secureConnectionFailed`, …), never retried.
  case transport(URLError, url: URL?)
  /// The server answered with a status outside the accepted range (200–299 by default).
  case unacceptableStatus(statusCode: Int, headers: HTTPHeaders, bodyExcerpt: String, url: URL)
  /// The body could not be decoded as the type named, at the coding path named.
  case decoding(type: String, codingPath: String, detail: String, bodyExcerpt: String, url: URL)
  /// The request (with its retries) did not finish before its deadline.
  case timedOut(url: URL?, deadline: Duration)
  /// The body grew past the client's size limit (decompressed bytes counted); it was cancelled.
  case tooLarge(limit: Int, url: URL?)
  /// The request, or a redirect hop (to a scheme other than `http` or `https`), was refused
  /// before anything was sent to it; the text says what was wrong.
  case invalidRequest(String)
  /// The server redirected more than `limit` times, or back to a URL already visited.
  case tooManyRedirects(limit: Int, url: URL?)
  /// The request was never sent: it waited `limit` (the client's `maximumQueueWait`) for one of
  /// the client's connections to its host, all busy with earlier requests.
  case queueWaitExceeded(limit: Duration, url: URL?)

  /// The most bytes of a body kept in an error, as text: 512.
  ///
  /// Enough to see a server's error message, small enough for a log line.
  public static let excerptLimit = 512

  /// The request's URL, without user-info, when the error concerns one.
  public var url: URL? {
    switch self {
    case .transport(_, let url), .timedOut(let url, _), .tooLarge(_, let url), .tooManyRedirects(_, let url):
      return url
    case .queueWaitExceeded(_, let url):
      return url
    case .unacceptableStatus(_, _, _, let url), .decoding(_, _, _, _, let url):
      return url
    case .invalidRequest:
      return nil
    }
  }

  /// The status code of an `unacceptableStatus` error, else `nil`.
  public var statusCode: Int? {
    if case .unacceptableStatus(let statusCode, _, _, _) = self { return statusCode }
    return nil
  }

  /// Returns a transport error with a clean `URLError`, as `TransportFailure` builds it.
  ///
  /// Its code is refined from libcurl's message where FoundationNetworking gave `.unknown`; the
  /// message is kept with credentials removed, and the URL without user-info.
  static func transportFailure(_ error: URLError, url: URL?) -> HTTPError {
    .transport(TransportFailure.urlError(from: error, url: url), url: url.map(Redaction.url))
  }

  /// Returns an unacceptable-status error for `response`, with a bounded, redacted excerpt.
  static func unacceptable(_ response: HTTPResponse) -> HTTPError {
    .unacceptableStatus(
      statusCode: response.statusCode, headers: response.headers.redacted,
      bodyExcerpt: response.bodyExcerpt(), url: response.url)
  }
}

extension HTTPError: CustomStringConvertible, LocalizedError {
  /// One sentence naming the problem and the URL, with credentials redacted.
  public var description: String {
    switch self {
    case .transport(let error, let url):
      let message = TransportFailure.message(of: error).map {
        ": \(Redaction.message($0, limit: Self.excerptLimit))"
      }
      return
        "HTTP transport error \(error.code.rawValue) (\(Self.name(of: error.code))\(message ?? "")) for \(Redaction.text(url))"
    case .unacceptableStatus(let status, let headers, let excerpt, let url):
      let body = excerpt.isEmpty ? "" : ", body: \(excerpt)"
      return "HTTP status \(status) is not acceptable for \(Redaction.text(url)) (headers: \(headers)\(body))"
    case .decoding(let type, let path, let detail, let excerpt, let url):
      let at = path.isEmpty ? "the top level" : "'\(path)'"
      return
        "could not decode \(type) at \(at) from the body of \(Redaction.text(url)): \(detail) (body: \(excerpt))"
    case .timedOut(let url, let deadline):
      return "HTTP request to \(Redaction.text(url)) timed out: its deadline of \(deadline) passed"
    case .tooLarge(let limit, let url):
      return "HTTP response from \(Redaction.text(url)) is larger than the limit of \(limit) bytes"
    case .invalidRequest(let what):
      return "HTTP request refused before sending: \(what)"
    case .tooManyRedirects(let limit, let url):
      return "too many redirects (a loop, or more than \(limit)) for \(Redaction.text(url))"
    case .queueWaitExceeded(let limit, let url):
      let host = url.map { RequestQueueKey($0).description } ?? "its host"
      return
        "HTTP request to \(Redaction.text(url)) was never sent: waited \(limit) for a connection to \(host)"
    }
  }

  /// The same text as `description`.
  public var errorDescription: String? { description }

  static func name(of code: URLError.Code) -> String {
    switch code {
    case .cannotConnectToHost: return "cannot connect to host"
    case .networkConnectionLost: return "network connection lost"
    case .cannotFindHost: return "cannot find host"
    case .dnsLookupFailed: return "DNS lookup failed"
    case .notConnectedToInternet: return "not connected to the internet"
    case .timedOut: return "timed out"
    case .badServerResponse: return "bad server response"
    case .zeroByteResource: return "empty reply"
    case .cannotParseResponse: return "cannot parse response"
    case .cannotDecodeContentData: return "cannot decode content"
    case .secureConnectionFailed: return "secure connection failed"
    case .serverCertificateUntrusted: return "server certificate untrusted"
    case .serverCertificateHasBadDate: return "server certificate expired"
    case .serverCertificateNotYetValid: return "server certificate not yet valid"
    case .serverCertificateHasUnknownRoot: return "server certificate has an unknown root"
    case .unsupportedURL: return "unsupported URL"
    case .cancelled: return "cancelled"
    case .userAuthenticationRequired: return "authentication required"
    default: return "URL error"
    }
  }
}
