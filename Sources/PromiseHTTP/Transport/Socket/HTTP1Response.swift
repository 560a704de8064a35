import Foundation

/// The head of an HTTP/1.x response as read from a socket: status line and header fields.
///
/// Parsed by `parse(_:)` from the bytes before the blank line; a head this module cannot read
/// is a `URLError(.cannotParseResponse)`, as FoundationNetworking reports it.
struct HTTP1ResponseHead: Equatable, Sendable {
  /// The largest head read: a longer one is refused (libcurl's limit is 100 KiB).
  static let maximumSize = 64 * 1024

  /// The version of the status line, `HTTP/1.1` say.
  var version: String
  var statusCode: Int
  /// The header fields in the order they arrived, names as sent.
  var fields: [(name: String, value: String)]

  static func == (lhs: Self, rhs: Self) -> Bool {
    lhs.version == rhs.version && lhs.statusCode == rhs.statusCode
      && lhs.fields.map(\.name) == rhs.fields.map(\.name)
      && lhs.fields.map(\.value) == rhs.fields.map(\.value)
  }

  /// Returns the values of the fields named `name` (ASCII case-insensitively), in order.
  func values(of name: String) -> [String] {
    fields.filter { FieldSyntax.equalsIgnoringASCIICase($0.name, name) }.map(\.value)
  }

  /// The header fields as `HTTPURLResponse` takes them: fields of one name joined by `, `.
  var headerFields: [String: String] {
    var joined: [String: String] = [:]
    var names: [String: String] = [:]
    for (name, value) in fields {
      let key = FieldSyntax.asciiLowercased(name)
      if let existing = names[key] {
        joined[existing] = joined[existing]! + ", " + value
      } else {
        names[key] = name
        joined[name] = value
      }
    }
    return joined
  }

  /// Returns the offset just past the blank line that ends a head in `bytes`, if it has arrived.
  ///
  /// A bare LF ends a line too (RFC 9112 §2.2 lets a recipient accept it).
  static func end(in bytes: UnsafeRawBufferPointer) -> Int? {
    var index = 0
    while index < bytes.count {
      if bytes[index] == 0x0A {
        // "\n\n" or "\n\r\n".
        if index + 1 < bytes.count, bytes[index + 1] == 0x0A { return index + 2 }
        if index + 2 < bytes.count, bytes[index + 1] == 0x0D, bytes[index + 2] == 0x0A { return index + 3 }
      }
      index += 1
    }
    return nil
  }

  /// Parses the head in `bytes` (the blank line included or not).
  ///
  /// Field names must be tokens and values may not hold a control byte other than a tab
  /// (`FieldSyntax`, RFC 9110 §5.1 and §5.5; libcurl refuses a NUL as "Nul byte in header"): such
  /// a head is refused, never delivered.
  static func parse(_ bytes: UnsafeRawBufferPointer) throws(URLError) -> HTTP1ResponseHead {
    // Split on the bytes: as a `String`, "\r\n" is one character, not a "\r" and a "\n".
    var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
      line.last == 0x0D ? line.dropLast() : line
    }
    while lines.last?.isEmpty == true { lines.removeLast() }
    guard let statusBytes = lines.first else { throw URLError(.cannotParseResponse) }
    // A byte that is not UTF-8 (obsolete ISO-8859-1 text) reads as U+FFFD rather than failing.
    let statusLine = String(decoding: statusBytes, as: UTF8.self)
    // "HTTP/1.1 200 OK": the reason phrase may be empty or absent.
    let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
    guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].utf8.count == 3,
      parts[1].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
      let code = Int(parts[1]), (100...999).contains(code)
    else { throw URLError(.cannotParseResponse) }
    var fields: [(name: String, value: String)] = []
    for line in lines.dropFirst() {
      if line.first == 0x20 || line.first == 0x09 {
        // An obsolete line folding: part of the previous field's value.
        guard !fields.isEmpty else { throw URLError(.cannotParseResponse) }
        fields[fields.count - 1].value += " " + (try value(line))
        continue
      }
      guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw URLError(.cannotParseResponse) }
      let name = line[..<colon]
      if let byte = FieldSyntax.invalidNameByte(name) {
        throw malformed(
          byte == 0 ? "Nul byte in header" : "Invalid byte 0x\(String(byte, radix: 16)) in a header name")
      }
      fields.append((String(decoding: name, as: UTF8.self), try value(line[(colon + 1)...])))
    }
    return HTTP1ResponseHead(version: String(parts[0]), statusCode: code, fields: fields)
  }

  /// The value in `bytes` (after the colon), without the spaces and tabs around it.
  private static func value(_ bytes: UnsafeRawBufferPointer.SubSequence) throws(URLError) -> String {
    // A bare CR inside a value becomes a space (RFC 9112 §2.2), so it cannot reach a stored
    // cookie or a field sent back.
    let spaced = bytes.map { $0 == 0x0D ? 0x20 : $0 }
    let trimmed = FieldSyntax.trimmingWhitespace(spaced[...])
    if let byte = FieldSyntax.invalidValueByte(trimmed) {
      throw malformed(
        byte == 0 ? "Nul byte in header" : "Control byte 0x\(String(byte, radix: 16)) in a header value")
    }
    // Not UTF-8: read as ISO-8859-1, the historical charset of field values (RFC 9110 §5.5),
    // as browsers read it; every byte is kept, none replaced.
    return String(validating: trimmed, as: UTF8.self)
      ?? String(String.UnicodeScalarView(trimmed.map { Unicode.Scalar($0) }))
  }

  /// A head refused for `reason`.
  private static func malformed(_ reason: String) -> URLError {
    URLError(.cannotParseResponse, userInfo: [NSLocalizedDescriptionKey: reason])
  }
}

/// How the body of a response is delimited on the wire (RFC 9112 §6.3).
enum HTTP1BodyFraming: Equatable, Sendable {
  /// No body: a response to `HEAD`, a 1xx, 204 or 304.
  case none
  /// Exactly this many bytes.
  case length(Int64)
  /// Chunked transfer coding.
  case chunked
  /// Everything until the server closes the connection.
  case untilClose

  /// The framing of the body of `head`, a response to `method`; a `Transfer-Encoding` other
  /// than chunked is `URLError(.cannotDecodeRawData)`, conflicting or malformed lengths are
  /// `URLError(.cannotParseResponse)`.
  init(head: HTTP1ResponseHead, method: String) throws(URLError) {
    if method.uppercased() == "HEAD" || (100..<200).contains(head.statusCode) || head.statusCode == 204
      || head.statusCode == 304
    {
      self = .none
      return
    }
    // Tokens compared as ASCII: `chun\u{212A}ed` (a Kelvin sign) is not `chunked`.
    let codings = head.values(of: "Transfer-Encoding").flatMap { $0.utf8.split(separator: UInt8(ascii: ",")) }
      .map {
        FieldSyntax.asciiLowercased(String(decoding: FieldSyntax.trimmingWhitespace($0), as: UTF8.self))
      }
      .filter { !$0.isEmpty }
    if !codings.isEmpty {
      // Only "chunked" is read; a transfer coding such as gzip would need decoding.
      guard codings == ["chunked"] else {
        throw URLError(
          .cannotDecodeRawData,
          userInfo: [
            NSLocalizedDescriptionKey:
              "The response's Transfer-Encoding is not chunked alone (\(codings.joined(separator: ", "))): its body cannot be framed"
          ])
      }
      self = .chunked
      return
    }
    let fields = head.values(of: "Content-Length")
    guard !fields.isEmpty else {
      self = .untilClose
      return
    }
    // An empty value, or an empty element of a list ("5,"), is malformed, not absent.
    let lengths = Set(
      fields.flatMap { $0.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) }
        .map { String(decoding: FieldSyntax.trimmingWhitespace($0), as: UTF8.self) })
    guard lengths.count == 1, let length = lengths.first, !length.isEmpty,
      length.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
      let count = Int64(length)
    else {
      throw URLError(
        .cannotParseResponse,
        userInfo: [
          NSLocalizedDescriptionKey:
            "The response's Content-Length is malformed, or given more than once with different values"
        ])
    }
    self = .length(count)
  }
}

/// Decodes a body sent with chunked transfer coding, as its bytes arrive in pieces of any size.
struct HTTP1ChunkedDecoder: Sendable {
  private enum State: Sendable {
    /// Reading a chunk-size line (with extensions, which are ignored).
    case size
    /// Passing on this many more bytes of a chunk's data.
    case data(Int64)
    /// Reading the line break after a chunk's data.
    case dataEnd
    /// Reading trailer fields, which are ignored, up to the blank line.
    case trailer
    case done
  }

  /// The longest control line (chunk size with extensions, or trailer field) accepted.
  static let maximumLineLength = 16 * 1024

  private var state = State.size
  private var line: [UInt8] = []
  /// The bytes of the trailer section read so far.
  private var trailerSize = 0

  /// Whether the last chunk and the trailer section have been read.
  var isDone: Bool {
    if case .done = state { true } else { false }
  }

  /// Decodes `bytes`, passing each run of body data to `emit`; returns how many bytes were
  /// consumed (fewer than given only once the body has ended).
  ///
  /// - Throws: `URLError(.cannotParseResponse)` for a malformed chunk size or line break.
  mutating func decode(
    _ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
  ) throws(URLError) -> Int {
    var index = 0
    while index < bytes.count {
      let rest = UnsafeRawBufferPointer(rebasing: bytes[index...])
      let (consumed, data) = try next(rest)
      if let data { try emit(UnsafeRawBufferPointer(rebasing: rest[data])) }
      // Nothing consumed: the body has ended.
      guard consumed > 0 else { break }
      index += consumed
    }
    return index
  }

  /// Decodes from the start of `bytes` up to the end of the first run of body data, the end of
  /// `bytes`, or the end of the body, whichever comes first.
  ///
  /// One run at a time, so that a caller can hand each one on before decoding further (the
  /// connection machine returns one action per call).
  ///
  /// - Returns: How many bytes were consumed, and the range in `bytes` of the run of data among
  ///   them, if one was reached.
  /// - Throws: `URLError(.cannotParseResponse)` for a malformed chunk size or line break.
  mutating func next(_ bytes: UnsafeRawBufferPointer) throws(URLError) -> (consumed: Int, data: Range<Int>?) {
    var index = 0
    while index < bytes.count {
      switch state {
      case .done:
        return (index, nil)
      case .data(let remaining):
        let count = Int(min(remaining, Int64(bytes.count - index)))
        state = remaining == Int64(count) ? .dataEnd : .data(remaining - Int64(count))
        return (index + count, index..<index + count)
      case .size, .dataEnd, .trailer:
        let byte = bytes[index]
        index += 1
        guard byte == 0x0A else {
          guard line.count < Self.maximumLineLength else { throw Self.malformed }
          line.append(byte)
          continue
        }
        if line.last == 0x0D { line.removeLast() }
        defer { line.removeAll(keepingCapacity: true) }
        try endLine()
      }
    }
    return (index, nil)
  }

  /// A control line ended (in `line`, without its line break).
  private mutating func endLine() throws(URLError) {
    switch state {
    case .size:
      // "1a2b;name=value": the size is hexadecimal, extensions are ignored.
      let digits = line.prefix {
        $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t")
      }
      // Hex digits only: `Int64(_:radix:)` also takes a sign, and a negative size would trap.
      // Leading zeros are legal ("0000000000000010" is 16 bytes); at most 15 significant digits
      // (below 2^60), so that no sum of sizes and offsets can overflow.
      guard !digits.isEmpty, digits.allSatisfy(Self.isHexDigit) else { throw Self.malformed }
      let significant = digits.drop { $0 == UInt8(ascii: "0") }
      guard significant.count <= 15,
        let size = significant.isEmpty ? 0 : Int64(String(decoding: significant, as: UTF8.self), radix: 16)
      else { throw Self.malformed }
      state = size == 0 ? .trailer : .data(size)
    case .dataEnd:
      guard line.isEmpty else { throw Self.malformed }
      state = .size
    case .trailer:
      if line.isEmpty {
        state = .done
      } else {
        // The section is capped as a head is: a server that sends trailer lines without end
        // would otherwise keep the body open for as long as bytes arrive.
        trailerSize += line.count + 2
        guard trailerSize <= HTTP1ResponseHead.maximumSize else { throw Self.trailerTooLong }
      }
    case .data, .done:
      break
    }
  }

  /// Whether `byte` is an ASCII hexadecimal digit.
  private static func isHexDigit(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
      UInt8(ascii: "A")...UInt8(ascii: "F"):
      true
    default:
      false
    }
  }

  /// The error of a trailer section longer than a head may be.
  static var trailerTooLong: URLError {
    URLError(
      .cannotParseResponse,
      userInfo: [
        NSLocalizedDescriptionKey: "The trailer section is longer than \(HTTP1ResponseHead.maximumSize) bytes"
      ])
  }

  /// The error of a malformed body, in libcurl's words.
  static var malformed: URLError {
    URLError(
      .cannotParseResponse,
      userInfo: [NSLocalizedDescriptionKey: "Illegal or missing hexadecimal sequence in chunked-encoding"])
  }
}
