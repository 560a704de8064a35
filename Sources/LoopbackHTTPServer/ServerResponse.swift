/// A well-formed HTTP response for the server to send.
///
/// `Content-Length` is added when sending unless the headers already carry one (or a
/// `Transfer-Encoding`), and unless the status forbids a body (1xx, 204, 304).
public struct ServerResponse: Sendable {
  /// The status code, for example `200`.
  public var status: Int
  /// The header fields, written in this order.
  public var headers: [(String, String)]
  /// The body bytes.
  public var body: [UInt8]

  /// Creates a response from a status, headers and body.
  public init(status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = []) {
    self.status = status
    self.headers = headers
    self.body = body
  }

  /// Returns a response whose body is `text` with `Content-Type: application/json`.
  public static func json(_ text: String, status: Int = 200) -> ServerResponse {
    ServerResponse(
      status: status, headers: [("Content-Type", "application/json")], body: Array(text.utf8))
  }

  /// Returns a response whose body is `text` with `Content-Type: text/plain; charset=utf-8`.
  public static func text(_ text: String, status: Int = 200) -> ServerResponse {
    ServerResponse(
      status: status, headers: [("Content-Type", "text/plain; charset=utf-8")],
      body: Array(text.utf8))
  }

  /// Returns an empty-bodied redirect to `location` (a relative or absolute URL).
  public static func redirect(to location: String, status: Int = 302) -> ServerResponse {
    ServerResponse(status: status, headers: [("Location", location)])
  }

  /// Returns the value of the first header with this name, compared case-insensitively.
  public func header(_ name: String) -> String? {
    let wanted = name.lowercased()
    return headers.first { $0.0.lowercased() == wanted }?.1
  }

  /// Returns the standard reason phrase for a status code, or `Status` when unknown.
  public static func reasonPhrase(for status: Int) -> String {
    switch status {
    case 100: "Continue"
    case 101: "Switching Protocols"
    case 200: "OK"
    case 201: "Created"
    case 202: "Accepted"
    case 204: "No Content"
    case 206: "Partial Content"
    case 301: "Moved Permanently"
    case 302: "Found"
    case 303: "See Other"
    case 304: "Not Modified"
    case 307: "Temporary Redirect"
    case 308: "Permanent Redirect"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 413: "Content Too Large"
    case 414: "URI Too Long"
    case 417: "Expectation Failed"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    case 505: "HTTP Version Not Supported"
    default: "Status"
    }
  }
}
