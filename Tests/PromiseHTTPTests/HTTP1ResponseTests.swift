import Foundation
import Testing

@testable import PromiseHTTP

/// Parses `text` as a response head.
private func head(_ text: String) throws -> HTTP1ResponseHead {
  try Array(text.utf8).withUnsafeBytes { bytes in try HTTP1ResponseHead.parse(bytes) }
}

/// The code of the `URLError` that `body` throws, or `nil` (recording an issue) if it throws
/// anything else or nothing.
private func urlErrorCode<T>(
  sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T
) -> URLError.Code? {
  do {
    let value = try body()
    Issue.record("expected a URLError, got \(value)", sourceLocation: sourceLocation)
  } catch let error as URLError {
    return error.code
  } catch {
    Issue.record("expected a URLError, got \(error)", sourceLocation: sourceLocation)
  }
  return nil
}

/// The framing of `text`, a response head, for a request with `method`.
private func framing(_ text: String, method: String = "GET") throws -> HTTP1BodyFraming {
  try HTTP1BodyFraming(head: head(text), method: method)
}

/// A small deterministic generator (SplitMix64), so that the random splits repeat from run to run.
private struct SeededGenerator: RandomNumberGenerator {
  var state: UInt64

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var value = state
    value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
    value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
    return value ^ (value >> 31)
  }
}

/// What a decoder made of some pieces: the body, the bytes it consumed, and whether it is done.
private struct Decoded: Equatable {
  var body: [UInt8] = []
  var consumed = 0
  var isDone = false
}

/// Decodes `pieces` in turn with one decoder, as a connection would hand them over.
private func decode(_ pieces: [ArraySlice<UInt8>]) throws -> Decoded {
  var decoder = HTTP1ChunkedDecoder()
  var decoded = Decoded()
  for piece in pieces {
    let consumed = try Array(piece).withUnsafeBytes { bytes in
      try decoder.decode(bytes) { decoded.body.append(contentsOf: $0) }
    }
    decoded.consumed += consumed
  }
  decoded.isDone = decoder.isDone
  return decoded
}

/// Decodes `bytes` handed over whole.
private func decode(_ bytes: [UInt8]) throws -> Decoded {
  try decode([bytes[...]])
}

/// `bytes` cut at random points (pieces of 0 to `largest` bytes).
private func randomPieces(
  _ bytes: [UInt8], largest: Int, using generator: inout SeededGenerator
) -> [ArraySlice<UInt8>] {
  var pieces: [ArraySlice<UInt8>] = []
  var start = 0
  while start < bytes.count {
    let end = min(bytes.count, start + Int.random(in: 0...largest, using: &generator))
    pieces.append(bytes[start..<end])
    start = end
  }
  return pieces
}

/// A chunked encoding of `body` in random chunk sizes, with random extensions, line breaks
/// (CRLF or a bare LF) and trailer fields.
private func randomChunked(_ body: [UInt8], using generator: inout SeededGenerator) -> [UInt8] {
  func lineBreak() -> String { Bool.random(using: &generator) ? "\r\n" : "\n" }
  var encoded: [UInt8] = []
  var start = 0
  while start < body.count {
    let end = min(body.count, start + Int.random(in: 1...700, using: &generator))
    var size = String(end - start, radix: 16, uppercase: Bool.random(using: &generator))
    if Int.random(in: 0..<4, using: &generator) == 0 { size += ";name=\"value\"; flag" }
    encoded += Array((size + lineBreak()).utf8) + body[start..<end] + Array(lineBreak().utf8)
    start = end
  }
  encoded += Array(("0" + lineBreak()).utf8)
  for index in 0..<Int.random(in: 0...2, using: &generator) {
    encoded += Array("X-Trailer-\(index): value \(index)\(lineBreak())".utf8)
  }
  encoded += Array(lineBreak().utf8)
  return encoded
}

/// The pure parser of the socket transport: response heads, body framing, chunked bodies.
@Suite("HTTP1Response")
struct HTTP1ResponseTests {
  // MARK: Heads

  @Test func aHeadWithCRLFLineBreaksIsParsed() throws {
    let parsed = try head("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length:   5  \r\n\r\n")
    #expect(parsed.version == "HTTP/1.1")
    #expect(parsed.statusCode == 200)
    #expect(parsed.fields.map(\.name) == ["Content-Type", "Content-Length"])
    #expect(parsed.fields.map(\.value) == ["text/plain", "5"])
    #expect(parsed.values(of: "content-length") == ["5"])
  }

  @Test func aHeadWithBareLFLineBreaksIsTheSameHead() throws {
    let crlf = try head("HTTP/1.0 404 Not Found\r\nA: 1\r\nB: 2\r\n\r\n")
    let lf = try head("HTTP/1.0 404 Not Found\nA: 1\nB: 2\n\n")
    let mixed = try head("HTTP/1.0 404 Not Found\nA: 1\r\nB: 2\n\r\n")
    #expect(crlf == lf)
    #expect(crlf == mixed)
    #expect(lf.version == "HTTP/1.0" && lf.statusCode == 404)
  }

  @Test func anObsoleteLineFoldingContinuesThePreviousValue() throws {
    let parsed = try head("HTTP/1.1 200 OK\r\nX-Long: first\r\n   second\r\n\tthird  \r\nX-Next: n\r\n\r\n")
    #expect(parsed.values(of: "X-Long") == ["first second third"])
    #expect(parsed.values(of: "X-Next") == ["n"])
  }

  @Test func aFoldingWithNoFieldBeforeItIsRefused() {
    #expect(urlErrorCode { try head("HTTP/1.1 200 OK\r\n folded\r\n\r\n") } == .cannotParseResponse)
  }

  @Test func fieldsOfOneNameAreJoinedWithACommaInTheirOrder() throws {
    let parsed = try head(
      "HTTP/1.1 200 OK\r\nVary: Accept\r\nX-Other: o\r\nvary: Accept-Encoding\r\nVARY: Cookie\r\n\r\n")
    #expect(parsed.values(of: "Vary") == ["Accept", "Accept-Encoding", "Cookie"])
    let joined = parsed.headerFields
    #expect(joined == ["Vary": "Accept, Accept-Encoding, Cookie", "X-Other": "o"])
  }

  @Test func aReasonPhraseMayBeAbsentEmptyOrLong() throws {
    #expect(try head("HTTP/1.1 204\r\n\r\n").statusCode == 204)
    #expect(try head("HTTP/1.1 204 \r\n\r\n").statusCode == 204)
    #expect(try head("HTTP/1.1 500 Internal   Server Error\r\n\r\n").statusCode == 500)
  }

  @Test(arguments: [
    "", "\r\n", "HTTP/1.1", "HTTP/1.1 ", "HTTP/2 200 OK", "HTTP/2.0 200 OK", "ICY 200 OK", "http/1.1 200 OK",
    "HTTP/1.1 20 OK", "HTTP/1.1 2000 OK", "HTTP/1.1 abc OK", "HTTP/1.1 +20 OK", "HTTP/1.1 -20 OK",
    "HTTP/1.1 099 Low", "HTTP/1.1  200 OK", " HTTP/1.1 200 OK", "HTTP/1.1\t200 OK",
  ])
  func aBadStatusLineIsRefused(_ statusLine: String) {
    #expect(urlErrorCode { try head(statusLine + "\r\nA: b\r\n\r\n") } == .cannotParseResponse)
  }

  @Test(arguments: [
    "No colon here", "Bad Name: x", "Name : x", "Name\t: x", ": no name", "\u{7F}", "=",
  ])
  func aMalformedFieldLineIsRefused(_ line: String) {
    #expect(urlErrorCode { try head("HTTP/1.1 200 OK\r\nA: b\r\n\(line)\r\n\r\n") } == .cannotParseResponse)
  }

  @Test func aFieldValueMayBeEmptyOrHoldColons() throws {
    let parsed = try head("HTTP/1.1 200 OK\r\nX-Empty:\r\nLocation: http://h:1/a?b=c:d\r\n\r\n")
    #expect(parsed.values(of: "X-Empty") == [""])
    #expect(parsed.values(of: "Location") == ["http://h:1/a?b=c:d"])
  }

  @Test func aValueThatIsNotUTF8IsReadAsISO88591NotRefused() throws {
    var bytes = Array("HTTP/1.1 200 OK\r\nX-Name: caf".utf8)
    bytes += [0xE9]  // "é" in ISO-8859-1
    bytes += Array("\r\n\r\n".utf8)
    let parsed = try bytes.withUnsafeBytes { try HTTP1ResponseHead.parse($0) }
    #expect(parsed.values(of: "X-Name") == ["caf\u{E9}"])
  }

  // MARK: The end of a head

  @Test func theEndOfAHeadIsFoundAfterItsBlankLine() {
    for (head, rest) in [
      ("HTTP/1.1 200 OK\r\nA: b\r\n\r\n", "body"), ("HTTP/1.1 200 OK\nA: b\n\n", "body"),
      ("HTTP/1.1 200 OK\nA: b\n\r\n", "body\r\n\r\n"), ("HTTP/1.1 200 OK\r\n\r\n", "\r\n"),
    ] {
      let found = Array((head + rest).utf8).withUnsafeBytes { HTTP1ResponseHead.end(in: $0) }
      #expect(found == head.utf8.count, "\(head.debugDescription)")
    }
    for partial in ["", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK\r\n", "HTTP/1.1 200 OK\r\nA: b\r\n\r", "\r\r"] {
      #expect(Array(partial.utf8).withUnsafeBytes { HTTP1ResponseHead.end(in: $0) } == nil)
    }
  }

  @Test func theEndOfAHeadArrivingInPiecesIsFoundOnlyOnceWholeAndAtTheSameOffset() {
    // The reader looks again each time more bytes arrive: every prefix of the stream.
    for text in [
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX: y\r\n\r\nabc",
      "HTTP/1.1 200 OK\nContent-Length: 3\nX: y\n\nabc",
      "HTTP/1.1 200 OK\r\nContent-Length: 3\nX: y\n\r\nabc",
    ] {
      let bytes = Array(text.utf8)
      let end = bytes.count - 3
      for count in 0...bytes.count {
        let found = bytes.withUnsafeBytes {
          HTTP1ResponseHead.end(in: UnsafeRawBufferPointer(rebasing: $0[..<count]))
        }
        #expect(found == (count >= end ? end : nil), "\(text.debugDescription) cut at \(count)")
      }
    }
  }

  // MARK: Framing

  @Test func responsesWithoutABodyHaveNoFraming() throws {
    let withLength = "Content-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n"
    #expect(try framing("HTTP/1.1 200 OK\r\n" + withLength, method: "HEAD") == HTTP1BodyFraming.none)
    #expect(try framing("HTTP/1.1 200 OK\r\n" + withLength, method: "head") == HTTP1BodyFraming.none)
    for status in [100, 101, 103, 199, 204, 304] {
      #expect(try framing("HTTP/1.1 \(status) X\r\n" + withLength) == HTTP1BodyFraming.none, "\(status)")
    }
  }

  @Test func chunkedTransferCodingIsReadWhateverTheCaseAndBeforeALength() throws {
    #expect(try framing("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") == .chunked)
    #expect(try framing("HTTP/1.1 200 OK\r\ntransfer-encoding:  Chunked \r\n\r\n") == .chunked)
    #expect(
      try framing("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n") == .chunked)
  }

  @Test(arguments: [
    "Transfer-Encoding: gzip, chunked", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked",
    "Transfer-Encoding: chunked, gzip", "Transfer-Encoding: identity", "Transfer-Encoding: chunked, chunked",
  ])
  func aTransferCodingOtherThanChunkedIsRefused(_ fields: String) {
    let code = urlErrorCode { try framing("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\n") }
    #expect(code == .cannotDecodeRawData)
  }

  @Test func equalContentLengthsAreOneLength() throws {
    #expect(try framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n") == .length(5))
    #expect(try framing("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n") == .length(5))
    #expect(try framing("HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n") == .length(5))
    #expect(try framing("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") == .length(0))
    #expect(
      try framing("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n") == .length(.max))
  }

  @Test(arguments: [
    "5, 6", "5\r\nContent-Length: 6", "-1", "+5", "abc", "0x10", "1.5", "9223372036854775808", "\u{0665}",
    "5 5", "", "5,", ", 5",
  ])
  func aBadOrConflictingContentLengthIsRefused(_ value: String) {
    let code = urlErrorCode { try framing("HTTP/1.1 200 OK\r\nContent-Length: \(value)\r\n\r\n") }
    #expect(code == .cannotParseResponse)
  }

  @Test func withNeitherLengthNorChunkingTheBodyRunsUntilClose() throws {
    #expect(try framing("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n") == .untilClose)
    #expect(try framing("HTTP/1.0 200 OK\r\n\r\n") == .untilClose)
    #expect(try framing("HTTP/1.1 404 Not Found\r\nTransfer-Encoding: \r\n\r\n") == .untilClose)
  }

  // MARK: Chunked bodies

  static let chunked = Array(
    ("5\r\nhello\r\n6;name=value;flag\r\n world\r\nA \r\n, chunked!\r\n0;last\r\n"
      + "Expires: never\r\nX-Trailer: t\r\n\r\nNEXT RESPONSE").utf8)
  static let chunkedEnd = chunked.count - "NEXT RESPONSE".count

  @Test func aChunkedBodyIsDecodedAndExtensionsAndTrailersIgnored() throws {
    let decoded = try decode(Self.chunked)
    #expect(String(decoding: decoded.body, as: UTF8.self) == "hello world, chunked!")
    #expect(decoded.isDone)
    #expect(decoded.consumed == Self.chunkedEnd, "the bytes after the body are left")
  }

  @Test func aChunkedBodyFedByteByByteGivesTheSameBody() throws {
    let whole = try decode(Self.chunked)
    let pieces = Self.chunked.indices.map { Self.chunked[$0...$0] }
    #expect(try decode(pieces) == whole)
  }

  @Test func aChunkedBodyFedInRandomPiecesGivesTheSameBody() throws {
    var generator = SeededGenerator(state: 20_260_417)
    for _ in 0..<200 {
      let body = (0..<Int.random(in: 0...3000, using: &generator)).map { _ in
        UInt8.random(in: 0...255, using: &generator)
      }
      let encoded = randomChunked(body, using: &generator)
      let whole = try decode(encoded)
      #expect(whole.body == body)
      #expect(whole.isDone && whole.consumed == encoded.count)
      let pieces = randomPieces(
        encoded, largest: Int.random(in: 1...64, using: &generator), using: &generator)
      #expect(try decode(pieces) == whole)
    }
  }

  @Test func theDecoderStopsAtTheEndOfTheBody() throws {
    var decoder = HTTP1ChunkedDecoder()
    var body: [UInt8] = []
    let consumed = try Array("0\r\n\r\nHTTP/1.1 200 OK".utf8).withUnsafeBytes {
      try decoder.decode($0) { body += $0 }
    }
    #expect(consumed == 5 && decoder.isDone && body.isEmpty)
    let later = try Array("more".utf8).withUnsafeBytes { try decoder.decode($0) { body += $0 } }
    #expect(later == 0 && body.isEmpty)
  }

  @Test(arguments: [
    "zz\r\n", "\r\n", ";ext\r\n", "5\r\nhelloX\r\n0\r\n\r\n", "5\r\nhello\r\r\n0\r\n\r\n",
    "5\r\nhello world\r\n", "-5\r\nhello\r\n0\r\n\r\n", "+5\r\nhello\r\n0\r\n\r\n", "0x5\r\nhello\r\n",
    "1000000000000000\r\n", " 5\r\nhello\r\n",
  ])
  func aMalformedChunkIsRefused(_ text: String) {
    #expect(urlErrorCode { try decode(Array(text.utf8)) } == .cannotParseResponse)
    // Byte by byte, the same.
    let bytes = Array(text.utf8)
    #expect(urlErrorCode { try decode(bytes.indices.map { bytes[$0...$0] }) } == .cannotParseResponse)
  }

  @Test func anOverlongControlLineIsRefused() {
    let limit = HTTP1ChunkedDecoder.maximumLineLength
    let longSize = Array(("5;" + String(repeating: "x", count: limit)).utf8)
    #expect(urlErrorCode { try decode(longSize) } == .cannotParseResponse)
    let longTrailer = Array(("0\r\nX-Trailer: " + String(repeating: "x", count: limit)).utf8)
    #expect(urlErrorCode { try decode(longTrailer) } == .cannotParseResponse)
    // Just below the limit is fine.
    let fits = Array(("5;" + String(repeating: "x", count: limit - 3) + "\r\nhello\r\n0\r\n\r\n").utf8)
    #expect((try? decode(fits))?.body == Array("hello".utf8))
  }

  @Test func theMalformedErrorSaysWhatLibcurlSays() {
    let error = HTTP1ChunkedDecoder.malformed
    #expect(error.code == .cannotParseResponse)
    #expect(error.localizedDescription.contains("chunked-encoding"))
  }
}
