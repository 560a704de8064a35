/// The one rule for HTTP field names and values, applied to the fields a request sends and to
/// those a response brings (RFC 9110 §5.1, §5.5, §5.6.2), and ASCII-only comparison of names and
/// framing tokens.
///
/// Names and tokens are ASCII: they are compared byte by byte, ASCII case-insensitively, never
/// with Unicode case folding (under which `Tran\u{17F}fer-Encoding` would equal
/// `Transfer-Encoding` and `chun\u{212A}ed` would equal `chunked`: two parsers that disagree on
/// framing are a request-smuggling primitive).
enum FieldSyntax {
  /// Whether `byte` may appear in a token: a method or a field name (RFC 9110 §5.6.2 `tchar`).
  static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"):
      true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
      UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
      UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
      true
    default:
      false
    }
  }

  /// Whether `byte` may appear in a field value: anything but a control byte other than the
  /// horizontal tab (NUL, CR, LF, the other C0 bytes and DEL); bytes of 0x80 and above
  /// (`obs-text`, UTF-8) are allowed.
  static func isValueByte(_ byte: UInt8) -> Bool {
    byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
  }

  /// The first byte of `name` that may not appear in a field name, or `nil` when it is a token;
  /// an empty name is reported as `0`.
  static func invalidNameByte<Bytes: Sequence<UInt8>>(_ name: Bytes) -> UInt8? {
    var isEmpty = true
    for byte in name {
      isEmpty = false
      if !isTokenByte(byte) { return byte }
    }
    return isEmpty ? 0 : nil
  }

  /// The first byte of `value` that may not appear in a field value, or `nil`.
  static func invalidValueByte<Bytes: Sequence<UInt8>>(_ value: Bytes) -> UInt8? {
    value.first { !isValueByte($0) }
  }

  /// Whether a field with `name` and `value` may be written or delivered as it is.
  static func isValidField(_ name: String, _ value: String) -> Bool {
    invalidNameByte(name.utf8) == nil && invalidValueByte(value.utf8) == nil
  }

  /// `byte` in lower case when it is an ASCII capital letter; every other byte as it is.
  @inline(__always)
  static func asciiLowercased(_ byte: UInt8) -> UInt8 {
    (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
  }

  /// Whether `a` and `b` are the same bytes but for the case of ASCII letters.
  static func equalsIgnoringASCIICase(_ a: some StringProtocol, _ b: some StringProtocol) -> Bool {
    a.utf8.elementsEqual(b.utf8) { asciiLowercased($0) == asciiLowercased($1) }
  }

  /// `text` with its ASCII capital letters in lower case and every other byte as it is.
  static func asciiLowercased(_ text: some StringProtocol) -> String {
    String(decoding: text.utf8.map(asciiLowercased), as: UTF8.self)
  }

  /// `bytes` without the spaces and tabs at either end (RFC 9110 `OWS`; no other whitespace).
  static func trimmingWhitespace<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes) -> Bytes.SubSequence {
    let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
    guard let first = bytes.firstIndex(where: { !isSpace($0) }) else { return bytes[bytes.endIndex...] }
    let last = bytes.lastIndex(where: { !isSpace($0) })!
    return bytes[first...last]
  }
}
