/// Reads HTTP/1.x requests off a connection, strictly enough to answer bad input with 400.
struct RequestParser {
  /// The largest request line or header line accepted.
  static let maxLineBytes = 16 * 1024
  /// The most header fields accepted in one request.
  static let maxHeaderCount = 200
  /// The largest request body read into memory (``RequestBodyHandling/buffer``).
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

  /// How a request's body is delimited.
  enum Framing: Equatable {
    /// No body.
    case none
    /// `Content-Length` bytes (more than zero).
    case length(Int64)
    /// Chunked transfer coding.
    case chunked
  }

  /// A request line and header fields, read before the body.
  struct Head {
    let method: String
    let target: String
    let version: String
    let headers: [(name: String, value: String)]
    let framing: Framing
    /// Whether the client waits for `100 Continue` before sending the body.
    let expectsContinue: Bool
    /// Whether the client asked to close after this request.
    let closeAfter: Bool
  }

  /// The outcome of reading a request's head.
  enum HeadOutcome {
    case head(Head)
    case closed
    case malformed(status: Int, message: String)
  }

  /// How reading a body without keeping it ended.
  enum ConsumeEnd: Equatable {
    /// The whole body was read.
    case complete
    /// The requested number of bytes was read, before the end of the body.
    case limitReached
    /// The client closed the connection before the end of the body.
    case streamEnded
    /// The sink refused a piece (for example a failed file write).
    case sinkFailed
    /// The chunked framing was broken: answer with this status and close.
    case malformed(status: Int, message: String)
  }

  /// Where requests come from, and what to stamp on them.
  var input: SocketInput
  let host: String
  let port: Int
  let connectionNumber: Int

  /// Reads the next request with its body; calls `sendContinue` before reading a body the
  /// client holds back behind `Expect: 100-continue`.
  mutating func next(sendContinue: () -> Bool) -> Outcome {
    switch nextHead() {
    case .closed: return .closed
    case .malformed(let status, let message): return .malformed(status: status, message: message)
    case .head(let head): return readBody(of: head, sendContinue: sendContinue)
    }
  }

  /// Returns the request a head and its body make.
  func request(_ head: Head, body: [UInt8] = [], consumedBody: ConsumedBody? = nil) -> RecordedRequest {
    RecordedRequest(
      method: head.method, path: head.target, version: head.version, headers: head.headers, body: body,
      host: host, port: port, connectionNumber: connectionNumber, consumedBody: consumedBody)
  }

  /// Reads the request line and header fields of the next request.
  mutating func nextHead() -> HeadOutcome {
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
    var framing = Framing.none
    if !transferCodings.isEmpty {
      guard transferCodings.last == "chunked", version == "HTTP/1.1" else {
        return .malformed(status: 501, message: "unsupported transfer coding")
      }
      guard lengths.isEmpty else {
        return .malformed(status: 400, message: "both Transfer-Encoding and Content-Length")
      }
      framing = .chunked
    } else if let first = lengths.first {
      guard lengths.allSatisfy({ $0 == first }), !first.isEmpty, first.count <= 18,
        first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let length = Int64(first)
      else { return .malformed(status: 400, message: "invalid Content-Length") }
      if length > 0 { framing = .length(length) }
    }

    // Expect: 100-continue.
    var expectsContinue = false
    if let expectation = headers.first(where: { $0.name.lowercased() == "expect" })?.value {
      guard expectation.lowercased() == "100-continue" else {
        return .malformed(status: 417, message: "unsupported expectation")
      }
      expectsContinue = version == "HTTP/1.1" && framing != .none
    }

    let connectionTokens = values("connection")
    let closeAfter =
      connectionTokens.contains("close")
      || (version == "HTTP/1.0" && !connectionTokens.contains("keep-alive"))
    return .head(
      Head(
        method: method, target: target, version: version, headers: headers, framing: framing,
        expectsContinue: expectsContinue, closeAfter: closeAfter))
  }

  /// Reads the whole body of `head` into the request (at most ``maxBodyBytes``).
  mutating func readBody(of head: Head, sendContinue: () -> Bool) -> Outcome {
    if case .length(let length) = head.framing, length > Int64(Self.maxBodyBytes) {
      return .malformed(status: 413, message: "body too large")
    }
    if head.expectsContinue {
      guard sendContinue() else { return .closed }
    }
    var body: [UInt8] = []
    switch head.framing {
    case .none:
      break
    case .chunked:
      switch readChunkedBody() {
      case .body(let bytes): body = bytes
      case .failed(let outcome): return outcome
      }
    case .length(let length):
      guard let bytes = input.read(count: Int(length)) else { return .closed }
      body = bytes
    }
    return .request(request(head, body: body), closeAfter: head.closeAfter)
  }

  /// Reads the body of `head` (at most `limit` bytes of it) and passes it to `sink` piece by
  /// piece (each at most `pieceSize` bytes) without keeping it; returns how many bytes were
  /// passed and how reading ended.
  mutating func consumeBody(
    of head: Head, limit: Int64? = nil, pieceSize: Int = 256 * 1024, sendContinue: () -> Bool,
    into sink: (UnsafeRawBufferPointer) -> Bool
  ) -> (bytes: Int64, end: ConsumeEnd) {
    if head.expectsContinue && limit != 0 {
      guard sendContinue() else { return (0, .streamEnded) }
    }
    var refused = false
    let checkedSink: (UnsafeRawBufferPointer) -> Bool = { piece in
      if sink(piece) { return true }
      refused = true
      return false
    }
    switch head.framing {
    case .none:
      return (0, .complete)
    case .length(let length):
      let wanted = min(length, limit ?? length)
      let passed = input.stream(count: wanted, pieceSize: pieceSize, into: checkedSink)
      if refused { return (passed, .sinkFailed) }
      if passed < wanted { return (passed, .streamEnded) }
      return (passed, wanted < length ? .limitReached : .complete)
    case .chunked:
      var total: Int64 = 0
      while true {
        if let limit, total >= limit { return (total, .limitReached) }
        let sizeLine: [UInt8]
        switch input.readLine(limit: 1024) {
        case .endOfStream: return (total, .streamEnded)
        case .tooLong: return (total, .malformed(status: 400, message: "chunk size line too long"))
        case .line(let line): sizeLine = line
        }
        guard let size = Self.chunkSize(sizeLine) else {
          return (total, .malformed(status: 400, message: "bad chunk size"))
        }
        if size == 0 { break }
        let wanted = min(Int64(size), (limit ?? .max) - total)
        let passed = input.stream(count: wanted, pieceSize: pieceSize, into: checkedSink)
        total += passed
        if refused { return (total, .sinkFailed) }
        if passed < wanted { return (total, .streamEnded) }
        if wanted < Int64(size) { return (total, .limitReached) }
        switch input.readLine(limit: 1) {
        case .endOfStream: return (total, .streamEnded)
        case .line(let line) where line.isEmpty: break
        case .line, .tooLong: return (total, .malformed(status: 400, message: "no CRLF after chunk"))
        }
      }
      switch readTrailers() {
      case nil: return (total, .complete)
      case .closed?: return (total, .streamEnded)
      case .malformed(let status, let message)?: return (total, .malformed(status: status, message: message))
      case .request?: return (total, .complete)
      }
    }
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
      guard let size = Self.chunkSize(sizeLine) else {
        return .failed(.malformed(status: 400, message: "bad chunk size"))
      }
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
    if let failure = readTrailers() { return .failed(failure) }
    return .body(body)
  }

  /// Reads the trailer fields up to the empty line and drops them; returns `nil`, or the
  /// outcome when the input ends or is malformed.
  private mutating func readTrailers() -> Outcome? {
    for _ in 0...Self.maxHeaderCount {
      switch input.readLine(limit: Self.maxLineBytes) {
      case .endOfStream: return .closed
      case .tooLong: return .malformed(status: 431, message: "trailer field too long")
      case .line(let line): if line.isEmpty { return nil }
      }
    }
    return .malformed(status: 431, message: "too many trailer fields")
  }

  /// Returns the size on a chunk size line (extensions after `;` ignored), or `nil`.
  private static func chunkSize(_ line: [UInt8]) -> Int? {
    let digits = trimmed(line[..<(line.firstIndex(of: 0x3B) ?? line.endIndex)])
    guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(isHexDigit) else { return nil }
    return Int(String(decoding: digits, as: UTF8.self), radix: 16)
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
