import Foundation

/// Percent-encoding of path segments, query items and whole paths.
enum PercentEncoding {
  /// RFC 3986 `unreserved`: letters, digits, `-`, `.`, `_`, `~`.
  static let unreserved: Set<UInt8> = {
    var set = Set<UInt8>()
    for byte in UInt8(ascii: "a")...UInt8(ascii: "z") { set.insert(byte) }
    for byte in UInt8(ascii: "A")...UInt8(ascii: "Z") { set.insert(byte) }
    for byte in UInt8(ascii: "0")...UInt8(ascii: "9") { set.insert(byte) }
    for character in "-._~".utf8 { set.insert(character) }
    return set
  }()

  /// `unreserved` plus the sub-delimiters that are safe inside one path segment.
  static let pathSegment: Set<UInt8> = unreserved.union("!$&'()*,;=:@".utf8)

  /// What a path (with its query) may hold as it is: `pathSegment` plus `/`, `?`, `#` and `+`.
  static let pathAndQuery: Set<UInt8> = pathSegment.union("/?#+".utf8)

  /// Returns `text` with the bytes a URL cannot hold written as `%XX`, and what it already
  /// escapes (`%` and two hex digits) left alone.
  ///
  /// `URL(string:)` re-escapes every `%` of a string it has to fix: `"a%2Fb c"` became
  /// `a%252Fb%20c`, while `"a%2Fb"` stays `a%2Fb` (Swift 6.3.1) — so one escape meant two
  /// different resources depending on a space elsewhere in the path. Escaping the invalid
  /// bytes first leaves it nothing to fix. A `%` that starts no escape becomes `%25`.
  static func encodeInvalid(_ text: String) -> String {
    let bytes = Array(text.utf8)
    var out = ""
    for (index, byte) in bytes.enumerated() {
      let startsEscape =
        byte == UInt8(ascii: "%") && index + 2 < bytes.count && isHexDigit(bytes[index + 1])
        && isHexDigit(bytes[index + 2])
      if startsEscape || pathAndQuery.contains(byte) {
        out.unicodeScalars.append(Unicode.Scalar(byte))
      } else {
        out += escape(byte)
      }
    }
    return out
  }

  /// `%XX` for `byte`, upper-case hex.
  private static func escape(_ byte: UInt8) -> String {
    "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
  }

  private static func isHexDigit(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
      || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
      || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
  }

  /// Returns `text` with every byte outside `kept` written as `%XX` (upper-case hex).
  static func encode(_ text: String, keeping kept: Set<UInt8>) -> String {
    var out = ""
    for byte in text.utf8 {
      if kept.contains(byte) {
        out.unicodeScalars.append(Unicode.Scalar(byte))
      } else {
        out += escape(byte)
      }
    }
    return out
  }
}
