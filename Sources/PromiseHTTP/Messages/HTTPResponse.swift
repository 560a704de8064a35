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
  ///
  /// Its query is kept as it is, for code that reads it; descriptions and errors redact the
  /// values of secret parameters (`HTTPClient.sensitiveQueryParameters`).
  public let url: URL
  /// The client's secret query parameters, JSON members and form fields; `nil` for the default.
  var sensitiveParameters: ParameterNameSet?

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

  /// Up to `limit` characters of the body as UTF-8 text, with `…` when it was cut, and with the
  /// values of secret JSON members and form fields, and the secrets of the URLs it quotes,
  /// replaced by `<redacted>`.
  ///
  /// Only the start of the body is examined (four times `limit` bytes), never the whole body,
  /// and it is redacted before it is cut, so a secret the cut falls in is redacted whole. A JSON
  /// member named as one of the client's `sensitiveQueryParameters` (`"token": "…"`,
  /// `"password": 42`) has its string or number value redacted, and so has a secret field of a
  /// form (`access_token=…&scope=read`); a URL anywhere in the text (`"url":
  /// "https://…?access_token=…"`, as httpbin echoes it, JSON-escaped `https:\/\/…`, or
  /// percent-encoded in a form value) loses its user-info and the values of its secret query
  /// parameters. The result has at most `limit` characters, plus `…`.
  public func bodyExcerpt(limit: Int = HTTPError.excerptLimit) -> String {
    Redaction.excerpt(
      of: body, contentType: headers["Content-Type"], limit: limit,
      parameters: sensitiveParameters ?? .defaultSensitive)
  }

  /// `url` without user-info and with the values of secret query parameters redacted: the URL
  /// an error about this response keeps.
  var redactedURL: URL {
    Redaction.url(url, redacting: sensitiveParameters ?? .defaultSensitive)
  }
}

extension HTTPResponse: CustomStringConvertible, CustomReflectable {
  /// The status, final URL, body size and headers, with credentials redacted.
  public var description: String {
    let shown = Redaction.text(url, parameters: sensitiveParameters ?? .defaultSensitive)
    return "HTTPResponse(\(statusCode), \(shown), \(body.count) bytes, headers: \(headers))"
  }

  /// A mirror with credentials redacted and the body's size in place of the body, for `dump`.
  public var customMirror: Mirror {
    let parameters = sensitiveParameters ?? .defaultSensitive
    return Mirror(
      self,
      children: [
        "statusCode": statusCode, "headers": headers, "body": "\(body.count) bytes",
        "requestURL": Redaction.text(requestURL, parameters: parameters),
        "url": Redaction.text(url, parameters: parameters),
      ], displayStyle: .struct)
  }
}
