/// Reads HTTP/1.x requests off a connection, strictly enough to answer bad input with 400.
struct RequestParser {
  /// The largest request line or header line accepted.
  static let maxLineBytes = 16 * 1024
  /// The most header fields accepted in one request.
  static let maxHeaderCount = 200
  /// The largest request body accepted.
  static let maxBodyBytes = 256 * 1024 * 1024

  /// The outcome of reading one request.
  enum Outcome {
    /// A complete request; `closeAfter` is true when the client asked to close afterwards.
    case request(RecordedRequest, closeAfter: Bool)
    /// The client closed the connection (cleanly between requests, or mid-request).
    case closed
    /// The input is not acceptable HTTP: answer with this status and close.
    case malformed(status: Int, message: String)
  }

  /// Where requests come from, and what to stamp on them.
  var input: SocketInput
  let host: String
  let port: Int
  let connectionNumber: Int

  /// Reads the next request; calls `sendContinue` before reading a body the client holds back
  /// behind `Expect: 100-continue`.
  mutating func next(sendContinue: () -> Bool) -> Outcome {
    // Request line (RFC 9112 allows ignoring empty lines before it).
    var requestLine: [UInt8] = []
    for _ in 0..<8 {
      switch input.readLine(limit: Self.maxLineBytes) {
      case .endOfStream: return .closed
      case .tooLong: return .malformed(status: 414, message: "request line too long")
      case .line(let line): requestLine = line
      }
      if !requestLine.isEmpty { break }
    }
    let parts = requestLine.split(separator: 0x20, omittingEmptySubsequences: false)
    guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(Self.isTokenByte),
      !parts[1].isEmpty, parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F })
    else { return .malformed(status: 400, message: "malformed request line") }
    let version = String(decoding: parts[2], as: UTF8.self)
    guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
      return .malformed(status: version.hasPrefix("HTTP/") ? 505 : 400, message: "bad version")
    }
    let method = String(decoding: parts[0], as: UTF8.self)
    let target = String(decoding: parts[1], as: UTF8.self)

    // Header fields.
    var headers: [(name: String, value: String)] = []
    while true {
      let line: [UInt8]
      switch input.readLine(limit: Self.maxLineBytes) {
      case .endOfStream: return .closed
      case .tooLong: return .malformed(status: 431, message: "header line too long")
      case .line(let read): line = read
      }
      if line.isEmpty { break }
      guard headers.count < Self.maxHeaderCount else {
        return .malformed(status: 431, message: "too many header fields")
      }
      guard let colon = line.firstIndex(of: 0x3A), colon > 0,
        line[..<colon].allSatisfy(Self.isTokenByte)
      else { return .malformed(status: 400, message: "malformed header field") }
      let value = Self.trimmed(line[(colon + 1)...])
      guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
        return .malformed(status: 400, message: "control character in header value")
      }
      headers.append(
        (String(decoding: line[..<colon], as: UTF8.self), String(decoding: value, as: UTF8.self)))
    }

    // The comma-separated list elements of every field with this (lowercase) name.
    func values(_ name: String) -> [String] {
      headers.filter { $0.name.lowercased() == name }.flatMap {
        $0.value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).map {
          String(decoding: Self.trimmed(ArraySlice($0)), as: UTF8.self).lowercased()
        }
      }
    }

    // Body framing.
    let transferCodings = values("transfer-encoding")
    let lengths = values("content-length")
    var chunked = false
    var contentLength = 0
    if !transferCodings.isEmpty {
      guard transferCodings.last == "chunked", version == "HTTP/1.1" else {
        return .malformed(status: 501, message: "unsupported transfer coding")
      }
      guard lengths.isEmpty else {
        return .malformed(status: 400, message: "both Transfer-Encoding and Content-Length")
      }
      chunked = true
    } else if let first = lengths.first {
      guard lengths.allSatisfy({ $0 == first }), !first.isEmpty, first.count <= 18,
        first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let length = Int(first)
      else { return .malformed(status: 400, message: "invalid Content-Length") }
      guard length <= Self.maxBodyBytes else {
        return .malformed(status: 413, message: "body too large")
      }
      contentLength = length
    }

    // Expect: 100-continue.
    if let expectation = headers.first(where: { $0.name.lowercased() == "expect" })?.value {
      guard expectation.lowercased() == "100-continue" else {
        return .malformed(status: 417, message: "unsupported expectation")
      }
      if version == "HTTP/1.1" && (chunked || contentLength > 0) {
        guard sendContinue() else { return .closed }
      }
    }

    // Body.
    var body: [UInt8] = []
    if chunked {
      switch readChunkedBody() {
      case .body(let bytes): body = bytes
      case .failed(let outcome): return outcome
      }
    } else if contentLength > 0 {
      guard let bytes = input.read(count: contentLength) else { return .closed }
      body = bytes
    }

    let connectionTokens = values("connection")
    let closeAfter =
      connectionTokens.contains("close")
      || (version == "HTTP/1.0" && !connectionTokens.contains("keep-alive"))
    let request = RecordedRequest(
      method: method, path: target, version: version, headers: headers, body: body, host: host,
      port: port, connectionNumber: connectionNumber)
    return .request(request, closeAfter: closeAfter)
  }

  /// The result of decoding a chunked body.
  private enum ChunkedBody {
    case body([UInt8])
    case failed(Outcome)
  }

  private mutating func readChunkedBody() -> ChunkedBody {
    var body: [UInt8] = []
    while true {
      let sizeLine: [UInt8]
      switch input.readLine(limit: 1024) {
      case .endOfStream: return .failed(.closed)
      case .tooLong: return .failed(.malformed(status: 400, message: "chunk size line too long"))
      case .line(let line): sizeLine = line
      }
      let digits = Self.trimmed(sizeLine[..<(sizeLine.firstIndex(of: 0x3B) ?? sizeLine.endIndex)])
      guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(Self.isHexDigit),
        let size = Int(String(decoding: digits, as: UTF8.self), radix: 16)
      else { return .failed(.malformed(status: 400, message: "bad chunk size")) }
      if size == 0 { break }
      guard body.count + size <= Self.maxBodyBytes else {
        return .failed(.malformed(status: 413, message: "body too large"))
      }
      guard let data = input.read(count: size) else { return .failed(.closed) }
      body.append(contentsOf: data)
      // The chunk data must be followed by an empty line (CRLF).
      switch input.readLine(limit: 1) {
      case .endOfStream: return .failed(.closed)
      case .line(let line) where line.isEmpty: break
      case .line, .tooLong: return .failed(.malformed(status: 400, message: "no CRLF after chunk"))
      }
    }
    // Trailer fields, up to the empty line; they are read and dropped.
    for _ in 0...Self.maxHeaderCount {
      switch input.readLine(limit: Self.maxLineBytes) {
      case .endOfStream: return .failed(.closed)
      case .tooLong: return .failed(.malformed(status: 431, message: "trailer field too long"))
      case .line(let line): if line.isEmpty { return .body(body) }
      }
    }
    return .failed(.malformed(status: 431, message: "too many trailer fields"))
  }

  private static func isHexDigit(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
      UInt8(ascii: "A")...UInt8(ascii: "F"):
      return true
    default:
      return false
    }
  }

  private static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"):
      return true
    default:
      return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
    }
  }

  private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    var slice = bytes
    while let first = slice.first, first == 0x20 || first == 0x09 { slice.removeFirst() }
    while let last = slice.last, last == 0x20 || last == 0x09 { slice.removeLast() }
    return slice
  }
}
