/// An HTTP request method, such as `GET` or `POST`.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  /// The method's name as sent on the wire, for example `"GET"`.
  public let rawValue: String

  /// Creates a method from its name as sent on the wire.
  public init(rawValue: String) {
    self.rawValue = rawValue
  }

  /// `GET`: reads a resource.
  public static let get = HTTPMethod(rawValue: "GET")
  /// `HEAD`: reads a resource's headers only.
  public static let head = HTTPMethod(rawValue: "HEAD")
  /// `POST`: submits data; not idempotent, so never retried by default.
  public static let post = HTTPMethod(rawValue: "POST")
  /// `PUT`: replaces a resource.
  public static let put = HTTPMethod(rawValue: "PUT")
  /// `PATCH`: modifies a resource; not idempotent, so never retried by default.
  public static let patch = HTTPMethod(rawValue: "PATCH")
  /// `DELETE`: removes a resource.
  public static let delete = HTTPMethod(rawValue: "DELETE")
  /// `OPTIONS`: asks which methods a resource allows.
  public static let options = HTTPMethod(rawValue: "OPTIONS")

  /// Whether repeating the request has the same effect as sending it once (RFC 9110, 9.2.2).
  public var isIdempotent: Bool {
    ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"].contains(rawValue)
  }

  /// The method's name, for example `GET`.
  public var description: String { rawValue }
}
