/// A request as the server received it, recorded for later assertions.
///
/// Header names keep the case the client sent; use ``header(_:)`` for a case-insensitive lookup.
public struct RecordedRequest: Sendable {
  /// The request method, exactly as sent (for example `GET`).
  public let method: String
  /// The request target as sent: path plus query, for example `/a/b?x=1`.
  public let path: String
  /// The protocol version from the request line, for example `HTTP/1.1`.
  public let version: String
  /// The header fields in the order they were received.
  public let headers: [(name: String, value: String)]
  /// The request body, with chunked transfer coding already removed; empty when the body was
  /// consumed without being kept (see ``consumedBody``).
  public let body: [UInt8]
  /// The size and checksum of a body the server read without keeping it, under
  /// ``RequestBodyHandling/consume(savingTo:)`` or ``RequestBodyHandling/cut(afterBytes:)``;
  /// `nil` when the body was buffered into ``body``.
  public let consumedBody: ConsumedBody?
  /// The local address the request arrived on: `127.0.0.1` or `127.0.0.2`.
  public let host: String
  /// The local port the request arrived on.
  public let port: Int
  /// The 1-based number of the TCP connection that carried the request, in accept order.
  ///
  /// Two requests with the same value travelled over one kept-alive connection.
  public let connectionNumber: Int

  /// Creates a recorded request; the server does this for you, tests of a ``Router`` may too.
  public init(
    method: String = "GET",
    path: String = "/",
    version: String = "HTTP/1.1",
    headers: [(name: String, value: String)] = [],
    body: [UInt8] = [],
    host: String = "127.0.0.1",
    port: Int = 0,
    connectionNumber: Int = 0,
    consumedBody: ConsumedBody? = nil
  ) {
    self.method = method
    self.path = path
    self.version = version
    self.headers = headers
    self.body = body
    self.host = host
    self.port = port
    self.connectionNumber = connectionNumber
    self.consumedBody = consumedBody
  }

  /// Returns the value of the first header with this name, compared case-insensitively.
  public func header(_ name: String) -> String? {
    let wanted = name.lowercased()
    return headers.first { $0.name.lowercased() == wanted }?.value
  }

  /// Returns the path without the query, for example `/a/b` for `/a/b?x=1`.
  public var pathWithoutQuery: String {
    if let mark = path.firstIndex(of: "?") {
      return String(path[..<mark])
    }
    return path
  }

  /// Returns the query after the first `?`, or `nil` when the target has none.
  public var query: String? {
    guard let mark = path.firstIndex(of: "?") else { return nil }
    return String(path[path.index(after: mark)...])
  }

  /// Returns the body decoded as UTF-8 (invalid bytes become U+FFFD).
  public var bodyText: String {
    String(decoding: body, as: UTF8.self)
  }
}
