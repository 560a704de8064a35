import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Every error an `HTTPClient` request can end with, each case carrying what went wrong.
///
/// Match a case with `catch HTTPError.timedOut` or `if case .unacceptableStatus(let status, …)`.
/// No case a client makes carries a credential: URLs are stored without user-info and with the
/// values of the client's `sensitiveQueryParameters` (`access_token`, `X-Amz-Signature`, … by
/// default) replaced by `<redacted>`, body excerpts with those of the same JSON members and form
/// fields replaced and the URLs they quote redacted alike, and the values of its
/// `sensitiveHeaders` (`Authorization`, `Cookie`, `X-Api-Key`, …) redacted. `description`,
/// `debugDescription`, `String(reflecting:)` and `dump` redact by the default lists again, so
/// they are safe to log.
///
/// `description` (what `"\(error)"` prints) is one line for a log: the status and its reason
/// phrase, the URL and the start of the body. `debugDescription` (what `String(reflecting:)`
/// prints) adds the response headers and the whole excerpt. Cancelling a request rejects it
/// with Swift's `CancellationError`, not with an `HTTPError`.
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
  ///
  /// The limit is `HTTPClient.maximumResponseSize` (4 MiB by default), for bodies kept in
  /// memory; `HTTPClient.download(_:to:)` streams a large body to a file instead.
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
  ///
  /// In an error a client made, the values of its secret query parameters are replaced by
  /// `<redacted>` (percent-encoded: `access_token=%3Credacted%3E`).
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

  /// The most characters of a body excerpt that `description` shows: 120, on one line.
  static let descriptionExcerptLimit = 120

  /// Returns an unacceptable-status error for `response`, with a bounded, redacted excerpt.
  static func unacceptable(_ response: HTTPResponse) -> HTTPError {
    .unacceptableStatus(
      statusCode: response.statusCode, headers: response.headers.redacted,
      bodyExcerpt: response.bodyExcerpt(), url: response.redactedURL)
  }
}

extension HTTPError {
  /// The host and port of `url`, lowercased, the port made explicit (80 for `http`, 443 for
  /// `https`): the origin a request waits for, as `RequestQueueKey` shows it.
  static func origin(_ url: URL) -> String {
    let port = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
    return "\(url.host?.lowercased() ?? ""):\(port)"
  }
}

extension HTTPError: CustomStringConvertible, CustomDebugStringConvertible, LocalizedError, CustomReflectable
{
  /// One line for a log: what went wrong and the URL, with credentials redacted.
  ///
  /// A status error reads `HTTP status 404 (Not Found) for https://api.example.com/config?key=<redacted>:
  /// {"error":"no such config"}`: the status, its reason phrase, the URL and the first
  /// characters of the body; no header.
  public var description: String {
    switch self {
    case .transport(let error, let url):
      let message = error.failureMessage.map {
        ": \(Redaction.message($0, limit: Self.excerptLimit))"
      }
      return
        "HTTP transport error \(error.code.rawValue) (\(Self.name(of: error.code))\(message ?? "")) for \(Redaction.text(url))"
    case .unacceptableStatus(let status, _, let excerpt, let url):
      let body = Self.oneLine(excerpt, limit: Self.descriptionExcerptLimit)
      return "\(Self.statusLine(status, url: url))\(body.isEmpty ? "" : ": \(body)")"
    case .decoding(let type, let path, let detail, let excerpt, let url):
      return Self.decodingLine(
        type: type, path: path, detail: detail,
        body: Self.oneLine(excerpt, limit: Self.descriptionExcerptLimit), url: url)
    case .timedOut(let url, let deadline):
      return "HTTP request to \(Redaction.text(url)) timed out: its deadline of \(deadline) passed"
    case .tooLarge(let limit, let url):
      return
        "HTTP response from \(Redaction.text(url)) is larger than the limit of \(limit) bytes (the client's maximumResponseSize); receive a large body with HTTPClient.download(_:to:), which writes it to a file"
    case .invalidRequest(let what):
      return "HTTP request refused before sending: \(what)"
    case .tooManyRedirects(let limit, let url):
      return "too many redirects (a loop, or more than \(limit)) for \(Redaction.text(url))"
    case .queueWaitExceeded(let limit, let url):
      let host = url.map(Self.origin) ?? "its host"
      return
        "HTTP request to \(Redaction.text(url)) was never sent: waited \(limit) for a connection to \(host)"
    }
  }

  /// `description` with the details a log line leaves out: a status error's response headers
  /// and the whole body excerpt, credentials redacted.
  public var debugDescription: String {
    switch self {
    case .unacceptableStatus(let status, let headers, let excerpt, let url):
      let body = Redaction.excerpt(excerpt, limit: Self.excerptLimit)
      return
        "\(Self.statusLine(status, url: url)) (headers: \(headers)\(body.isEmpty ? "" : ", body: \(body)"))"
    case .decoding(let type, let path, let detail, let excerpt, let url):
      return Self.decodingLine(
        type: type, path: path, detail: detail, body: Redaction.excerpt(excerpt, limit: Self.excerptLimit),
        url: url)
    default:
      return description
    }
  }

  /// The same text as `description`.
  public var errorDescription: String? { description }

  /// A mirror of the case's values with credentials redacted, for `dump`.
  public var customMirror: Mirror {
    let children: KeyValuePairs<String, Any>
    switch self {
    case .transport(let error, let url):
      children = [
        "code": error.code.rawValue,
        "message": error.failureMessage.map { Redaction.message($0, limit: Self.excerptLimit) }
          ?? "",
        "url": Redaction.text(url),
      ]
    case .unacceptableStatus(let status, let headers, let excerpt, let url):
      children = [
        "statusCode": status, "headers": headers,
        "bodyExcerpt": Redaction.excerpt(excerpt, limit: Self.excerptLimit), "url": Redaction.text(url),
      ]
    case .decoding(let type, let path, let detail, let excerpt, let url):
      children = [
        "type": type, "codingPath": path,
        "detail": Redaction.redactedURLs(in: detail, parameters: .defaultSensitive),
        "bodyExcerpt": Redaction.excerpt(excerpt, limit: Self.excerptLimit), "url": Redaction.text(url),
      ]
    case .timedOut(let url, let deadline):
      children = ["url": Redaction.text(url), "deadline": deadline]
    case .tooLarge(let limit, let url):
      children = ["limit": limit, "url": Redaction.text(url)]
    case .invalidRequest(let what):
      children = ["reason": what]
    case .tooManyRedirects(let limit, let url):
      children = ["limit": limit, "url": Redaction.text(url)]
    case .queueWaitExceeded(let limit, let url):
      children = ["limit": limit, "url": Redaction.text(url)]
    }
    return Mirror(self, children: children, displayStyle: .enum)
  }

  /// `HTTP status 404 (Not Found) for URL`.
  private static func statusLine(_ status: Int, url: URL) -> String {
    "HTTP status \(status) (\(HTTPURLResponse.localizedString(forStatusCode: status))) for \(Redaction.text(url))"
  }

  private static func decodingLine(type: String, path: String, detail: String, body: String, url: URL)
    -> String
  {
    let at = path.isEmpty ? "the top level" : "'\(path)'"
    let detail = Redaction.redactedURLs(in: detail, parameters: .defaultSensitive)
    return
      "could not decode \(type) at \(at) from the body of \(Redaction.text(url)): \(detail) (body: \(body))"
  }

  /// `excerpt` redacted, cut to `limit` characters and on one line (runs of white space, line
  /// breaks included, become one space).
  private static func oneLine(_ excerpt: String, limit: Int) -> String {
    let flat = excerpt.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    return Redaction.excerpt(flat, limit: limit)
  }

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
    case .clientCertificateRequired: return "client certificate required"
    case .clientCertificateRejected: return "client certificate rejected"
    case .unsupportedURL: return "unsupported URL"
    case .cancelled: return "cancelled"
    case .userAuthenticationRequired: return "authentication required"
    default: return "URL error"
    }
  }
}

extension URLError {
  /// The message FoundationNetworking gave the error (libcurl's, often), if it gave one.
  var failureMessage: String? {
    guard let text = userInfo[NSLocalizedDescriptionKey] as? String else { return nil }
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    return trimmed.isEmpty ? nil : trimmed
  }
}
