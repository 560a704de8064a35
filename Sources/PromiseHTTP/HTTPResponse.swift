import Foundation

/// A response as the server sent it: status code, headers, body and URLs.
///
/// The body is complete and already decompressed (FoundationNetworking inflates `gzip`,
/// `deflate`, `br` and `zstd`); its size never exceeds the client's `maximumResponseSize`.
public struct HTTPResponse: Sendable {
  /// The status code, for example `200`.
  public let statusCode: Int
  /// The response headers; look fields up in any case: `headers["content-type"]`.
  public let headers: HTTPHeaders
  /// The body, as `Data` (pass it to `JSONDecoder`, `String(decoding:as:)` and the like as is).
  public let body: Data
  /// The URL that was requested (before any redirect), without user-info.
  public let requestURL: URL
  /// The URL that answered, after redirects, without user-info.
  public let url: URL

  /// Creates a response; the client does this for you, tests and adapters may too.
  public init(
    statusCode: Int, headers: HTTPHeaders = [:], body: Data = Data(), requestURL: URL, url: URL? = nil
  ) {
    self.statusCode = statusCode
    self.headers = headers
    self.body = body
    self.requestURL = Redaction.url(requestURL)
    self.url = Redaction.url(url ?? requestURL)
  }

  /// The body decoded as UTF-8 (invalid bytes become U+FFFD).
  public var text: String {
    String(decoding: body, as: UTF8.self)
  }

  /// Up to `limit` bytes of the body as UTF-8 text, with `…` when it was cut.
  public func bodyExcerpt(limit: Int = HTTPError.excerptLimit) -> String {
    guard body.count > limit else { return text }
    return String(decoding: body.prefix(limit), as: UTF8.self) + "…"
  }
}

extension HTTPResponse: CustomStringConvertible {
  /// The status, final URL, body size and headers, with credentials redacted.
  public var description: String {
    "HTTPResponse(\(statusCode), \(url.absoluteString), \(body.count) bytes, headers: \(headers))"
  }
}
