import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A request for `HTTPClient.send(_:)`: method, path relative to the base URL, query, headers, body.
///
/// The per-method helpers (`get`, `post`, …) build one of these for you. Nothing is checked when
/// you build it; `send` refuses it with `HTTPError.invalidRequest` — before anything goes on the
/// wire — when a header name or value holds CR, LF or another control byte, when the path has a
/// `.` or `..` segment, or when the URL is not `http` or `https`.
public struct HTTPRequest: Sendable {
  /// The method, `GET` by default.
  public var method: HTTPMethod
  /// The path relative to the client's base URL (`"stream/config"`), or an absolute URL.
  ///
  /// Bytes a URL cannot hold (a space, `ü`, `[`) are percent-encoded; escapes already in the
  /// path (`%2F`) are kept as they are, and a `?` starts a query. For segments from untrusted
  /// input, build the path with `HTTPPath`.
  ///
  /// An absolute URL on another scheme, host or port than the base URL gets neither the
  /// client's default headers that are among its `sensitiveHeaders` nor the authenticator's
  /// token; headers given with the request itself are sent.
  ///
  /// Build it from untrusted input with `HTTPPath(segments:)`.
  public var path: String
  /// Query items appended to the URL, in order; names and values are percent-encoded (`+` too).
  public var query: [URLQueryItem]
  /// Header fields, added to (and overriding) the client's default headers.
  public var headers: HTTPHeaders
  /// The body, or `nil` for none.
  public var body: Data?
  /// A deadline for this request, on top of the client's `timeout`; the earlier one applies.
  public var deadline: Deadline?
  /// The status codes that fulfil the promise; `nil` uses the client's `acceptableStatusCodes`.
  public var acceptableStatusCodes: Range<Int>?
  /// The retry policy for this request; `nil` uses the client's `retryPolicy`.
  public var retryPolicy: RetryPolicy?
  /// The redirect policy for this request; `nil` uses the client's `redirectPolicy`.
  ///
  /// With `.doNotFollow`, accept redirect statuses too (`acceptableStatusCodes: 200..<400`) to
  /// receive the 3xx as a response rather than as `HTTPError.unacceptableStatus`.
  public var redirectPolicy: RedirectPolicy?

  /// Creates a request.
  public init(
    method: HTTPMethod = .get, path: String, query: [URLQueryItem] = [], headers: HTTPHeaders = [:],
    body: Data? = nil, deadline: Deadline? = nil, acceptableStatusCodes: Range<Int>? = nil,
    retryPolicy: RetryPolicy? = nil, redirectPolicy: RedirectPolicy? = nil
  ) {
    self.method = method
    self.path = path
    self.query = query
    self.headers = headers
    self.body = body
    self.deadline = deadline
    self.acceptableStatusCodes = acceptableStatusCodes
    self.retryPolicy = retryPolicy
    self.redirectPolicy = redirectPolicy
  }

  /// Returns the problem with a header field, or `nil` when it may be sent.
  ///
  /// Names must be RFC 9110 tokens; values may hold visible ASCII, spaces, tabs and non-ASCII
  /// text, but no CR, LF, NUL or other control byte (which would split or end the header block):
  /// `FieldSyntax`, the rule the socket transport applies to the fields of a response too.
  static func headerProblem(
    name: String, value: String, sensitive names: HeaderNameSet = .defaultSensitive
  ) -> String? {
    if name.isEmpty { return "a header has an empty name" }
    if let byte = FieldSyntax.invalidNameByte(name.utf8) {
      return "the header name '\(Self.printable(name))' has the invalid byte 0x\(String(byte, radix: 16))"
    }
    if let byte = FieldSyntax.invalidValueByte(value.utf8) {
      let shown = names.contains(name) ? Redaction.placeholder : Self.printable(value)
      return "the value of header '\(name)' has the control byte 0x\(String(byte, radix: 16)): '\(shown)'"
    }
    return nil
  }

  /// `text` with control bytes shown as `\r`, `\n` or `\u{…}`.
  static func printable(_ text: String) -> String {
    text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? $0.escaped(asASCII: true) : String($0) }
      .joined()
  }
}

extension HTTPRequest: CustomStringConvertible, CustomReflectable {
  /// The method, path and query, headers and body size, with credentials redacted.
  ///
  /// The values of sensitive headers and of secret query parameters are shown as `<redacted>`
  /// (`HTTPClient.defaultSensitiveHeaders`, `HTTPClient.defaultSensitiveQueryParameters`): a
  /// request does not know which client will send it.
  public var description: String {
    let body = body.map { ", body: \($0.count) bytes" } ?? ""
    return "HTTPRequest(\(method.rawValue) \(redactedTarget), headers: \(headers)\(body))"
  }

  /// A mirror with credentials redacted, for `dump`.
  public var customMirror: Mirror {
    Mirror(
      self,
      children: [
        "method": method, "path": redactedTarget, "headers": headers,
        "body": body.map { "\($0.count) bytes" } as Any, "deadline": deadline as Any,
        "acceptableStatusCodes": acceptableStatusCodes as Any, "retryPolicy": retryPolicy as Any,
        "redirectPolicy": redirectPolicy as Any,
      ], displayStyle: .struct)
  }

  /// The path with the query items appended, secret values redacted.
  private var redactedTarget: String {
    let items = query.map {
      PercentEncoding.encode($0.name, keeping: PercentEncoding.unreserved) + "="
        + PercentEncoding.encode($0.value ?? "", keeping: PercentEncoding.unreserved)
    }.joined(separator: "&")
    let separator = path.contains("?") ? "&" : "?"
    let target = items.isEmpty ? path : path + separator + items
    return Redaction.reference(target, parameters: .defaultSensitive)
  }
}
