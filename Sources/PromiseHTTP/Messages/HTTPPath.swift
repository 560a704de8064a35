/// A relative path built from segments, each percent-encoded, so untrusted input stays one segment.
///
/// `HTTPPath(segments: "users", userID, "avatar").string` puts `userID` in one segment whatever
/// it holds: `/`, `?`, `#`, `%` and spaces are percent-encoded, so `"../admin"` becomes
/// `..%2Fadmin`. A segment that is exactly `.` or `..` cannot be encoded away (servers decode
/// `%2E%2E` back to `..`), so the client refuses such a path with `HTTPError.invalidRequest`
/// before sending anything: input can never climb out of the base URL's path.
public struct HTTPPath: Sendable, Hashable, CustomStringConvertible {
  /// The segments as given, not encoded.
  public let segments: [String]

  /// Creates a path from segments given as variadic arguments.
  public init(segments: String...) {
    self.segments = segments
  }

  /// Creates a path from an array of segments.
  public init(segments: [String]) {
    self.segments = segments
  }

  /// Returns this path with one more segment at the end.
  public func appending(_ segment: String) -> HTTPPath {
    HTTPPath(segments: segments + [segment])
  }

  /// The percent-encoded relative path, for example `users/a%2Fb/avatar`.
  ///
  /// Pass it as the `path` of any `HTTPClient` method.
  public var string: String {
    segments.map(Self.encode).joined(separator: "/")
  }

  /// The same as `string`.
  public var description: String { string }

  /// Percent-encodes every byte of `segment` that is not allowed in a path segment.
  static func encode(_ segment: String) -> String {
    PercentEncoding.encode(segment, keeping: PercentEncoding.pathSegment)
  }

  /// Returns a description of the first dot-segment (`.` or `..`, also percent-encoded) in `path`.
  static func dotSegmentProblem(in path: String) -> String? {
    let pathPart = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    for raw in pathPart.split(separator: "/", omittingEmptySubsequences: false) {
      let decoded = String(raw).removingPercentEncodingLossy.lowercased()
      if decoded == "." || decoded == ".." {
        return "the path '\(path)' has a '\(raw)' segment, which could leave the base URL's path"
      }
    }
    return nil
  }
}

extension String {
  /// The string with `%2E`-style escapes decoded, leaving malformed escapes as they are.
  fileprivate var removingPercentEncodingLossy: String {
    var bytes: [UInt8] = []
    var iterator = Array(utf8)[...]
    while let byte = iterator.popFirst() {
      if byte == UInt8(ascii: "%"), iterator.count >= 2,
        let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16)
      {
        bytes.append(value)
        iterator = iterator.dropFirst(2)
      } else {
        bytes.append(byte)
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}
