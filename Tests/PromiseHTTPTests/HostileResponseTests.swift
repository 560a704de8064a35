import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Parses `bytes` as a response head; the `URLError` it throws, if any.
private func parsed(_ bytes: [UInt8]) -> Result<HTTP1ResponseHead, URLError> {
  do {
    return .success(try bytes.withUnsafeBytes { try HTTP1ResponseHead.parse($0) })
  } catch {
    return .failure(error as! URLError)
  }
}

/// The bytes of `text` (its Unicode scalars in UTF-8).
private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Decodes `body` (a chunked body) whole; the body's bytes, or the error.
private func dechunked(_ body: [UInt8]) -> Result<[UInt8], URLError> {
  var decoder = HTTP1ChunkedDecoder()
  var output: [UInt8] = []
  do {
    _ = try body.withUnsafeBytes { bytes in
      try decoder.decode(bytes) { output.append(contentsOf: $0) }
    }
  } catch {
    return .failure(error as! URLError)
  }
  return decoder.isDone ? .success(output) : .failure(URLError(.networkConnectionLost))
}

/// Responses a server or a proxy may send to break the client, read as curl reads them: framing
/// tokens and names compared as ASCII, control bytes refused, legal framings accepted, and every
/// size the server gives checked before it is added to another.
@Suite("Hostile responses", .timeLimit(.minutes(1)))
struct HostileResponseTests {
  /// The code of the error framing the body of `head` fails with, or `nil` if it does not fail.
  private func framingError(_ head: HTTP1ResponseHead) -> URLError.Code? {
    do {
      _ = try HTTP1BodyFraming(head: head, method: "GET")
      return nil
    } catch {
      return error.code
    }
  }

  // MARK: Framing compared as ASCII (item 3)

  @Test func aKelvinSignInTransferEncodingIsNotChunked() throws {
    // "chun\u{212A}ed" lower-cases to "chunked" under Unicode case mapping; curl reads it as an
    // unknown coding.
    let head = try parsed(bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chun\u{212A}ed\r\n\r\n")).get()
    #expect(framingError(head) == .cannotDecodeRawData)
  }

  @Test func aLongSInAFieldNameIsRefusedNotTakenForTransferEncoding() {
    let result = parsed(
      bytes("HTTP/1.1 200 OK\r\nTran\u{017F}fer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"))
    guard case .failure(let error) = result else {
      Issue.record("accepted: \(result)")
      return
    }
    #expect(error.code == .cannotParseResponse)
  }

  @Test func namesAreLookedUpAsASCIIOnly() throws {
    let head = try parsed(bytes("HTTP/1.1 200 OK\r\nCONTENT-length: 5\r\n\r\n")).get()
    #expect(head.values(of: "content-LENGTH") == ["5"])
    #expect(head.values(of: "Content-Length\u{017F}").isEmpty)
    #expect(head.headerFields == ["CONTENT-length": "5"])
  }

  @Test func onlySpacesAndTabsAroundATokenAreTrimmed() throws {
    // A no-break space is Unicode whitespace, not HTTP's: "chunked\u{A0}" is another coding.
    let head = try parsed(bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: \t chunked\u{A0}\r\n\r\n")).get()
    #expect(framingError(head) == .cannotDecodeRawData)
    let padded = try parsed(bytes("HTTP/1.1 200 OK\r\nContent-Length: \t 7 \t\r\n\r\n")).get()
    #expect(try HTTP1BodyFraming(head: padded, method: "GET") == .length(7))
    let unicodeDigits = try parsed(bytes("HTTP/1.1 200 OK\r\nContent-Length: \u{0667}\r\n\r\n")).get()
    #expect(framingError(unicodeDigits) == .cannotParseResponse)
  }

  // MARK: Control bytes (item 4)

  /// A field line libcurl refuses, and the words of the error.
  static let refusedFields: [(field: [UInt8], words: String)] = [
    (bytes("X-A: a") + [0] + bytes("b"), "Nul byte in header"),
    (bytes("X-") + [0] + bytes("A: b"), "Nul byte in header"),
    (bytes("X-") + [1] + bytes("A: b"), "Invalid byte 0x1 in a header name"),
    (bytes("X-(A): b"), "Invalid byte 0x28 in a header name"),
    (bytes("X-A: a") + [0x7F] + bytes("b"), "Control byte 0x7f in a header value"),
    (bytes("X-A: a") + [0x1B] + bytes("b"), "Control byte 0x1b in a header value"),
    (bytes(": empty name"), "Nul byte in header"),
  ]

  @Test(arguments: 0..<Self.refusedFields.count)
  func aControlByteOrASeparatorInAFieldIsRefused(_ index: Int) {
    let (field, words) = Self.refusedFields[index]
    let result = parsed(bytes("HTTP/1.1 200 OK\r\n") + field + bytes("\r\nContent-Length: 0\r\n\r\n"))
    guard case .failure(let error) = result else {
      Issue.record("accepted: \(result)")
      return
    }
    #expect(error.code == .cannotParseResponse)
    #expect(error.localizedDescription == words)
  }

  @Test func tabsObsoleteTextAndUTF8StayInValues() throws {
    let head = try parsed(bytes("HTTP/1.1 200 OK\r\nX-A: a\tb é\r\nX-B: ") + [0xE9] + bytes("\r\n\r\n")).get()
    // UTF-8 stays UTF-8; a value that is not UTF-8 is read as ISO-8859-1, every byte kept.
    #expect(head.fields.map(\.value) == ["a\tb é", "\u{E9}"])
    let mixed = try parsed(bytes("HTTP/1.1 200 OK\r\nX-C: ") + [0xC3, 0xA9, 0xFF] + bytes("\r\n\r\n")).get()
    #expect(mixed.fields.map(\.value) == ["\u{C3}\u{A9}\u{FF}"])
  }

  @Test func theRequestAndTheResponseSidesShareOneFieldRule() {
    let cases: [(String, String)] = [
      ("X-A", "a\u{1}b"), ("X-A", "a\u{7F}"), ("X-(A)", "b"), ("", "b"), ("X-A", "a\tb é"), ("X-A", "ok"),
      ("Tran\u{017F}fer-Encoding", "x"), ("X-A", "a\0b"),
    ]
    for (name, value) in cases {
      let sendable = HTTPRequest.headerProblem(name: name, value: value) == nil
      #expect(SocketTransportSettings.isSafeField(name, value) == sendable, "\(name): \(value)")
      let result = parsed(bytes("HTTP/1.1 200 OK\r\n\(name): \(value)\r\n\r\n"))
      let delivered = if case .success = result { true } else { false }
      #expect(delivered == sendable, "\(name): \(value) \(result)")
    }
  }

  // MARK: Legal framings (item 5) and the trailer section (item 6)

  @Test func aChunkSizeWithLeadingZerosIsRead() {
    let body = bytes("0000000000000005\r\nhello\r\n00000000000000000000\r\n\r\n")
    #expect(dechunked(body) == .success(bytes("hello")))
    // Sixteen significant digits would be 2^60 or more: refused, as before.
    #expect(dechunked(bytes("1000000000000000\r\n")) == .failure(HTTP1ChunkedDecoder.malformed))
  }

  @Test func aTrailerSectionIsCappedAsAHeadIs() {
    let line = bytes("X-Trailer: " + String(repeating: "t", count: 1000) + "\r\n")
    let fits = Array(repeating: line, count: 60).joined()
    #expect(dechunked(bytes("5\r\nhello\r\n0\r\n") + fits + bytes("\r\n")) == .success(bytes("hello")))
    let endless = Array(repeating: line, count: 70).joined()
    #expect(dechunked(bytes("5\r\nhello\r\n0\r\n") + endless) == .failure(HTTP1ChunkedDecoder.trailerTooLong))
  }

  @Test func aTransferEncodingOverridesContentLengthForADownloadsCheck() {
    let response = HTTPURLResponse(
      url: URL(string: "http://example.com/")!, statusCode: 200, httpVersion: "HTTP/1.1",
      headerFields: ["Content-Length": "3", "Transfer-Encoding": "chunked"])!
    #expect(DownloadSink.declaredLength(of: response) == nil)
    let plain = HTTPURLResponse(
      url: URL(string: "http://example.com/")!, statusCode: 200, httpVersion: "HTTP/1.1",
      headerFields: ["Content-Length": "3"])!
    #expect(DownloadSink.declaredLength(of: plain) == 3)
  }

  // MARK: Sizes from the server (item 1)

  @Test func aContentRangeWhoseEndIsTheLargestNumberIsRefused() {
    #expect(DownloadSink.contentRange("bytes 0-9223372036854775807/*") == nil)
    #expect(DownloadSink.contentRange("bytes 0-9223372036854775806/*")?.end == Int64.max - 1)
    #expect(DownloadSink.contentRange("bytes 48-99/100")?.total == 100)
    #expect(DownloadSink.contentRange("bytes 0-99999999999999999999/*") == nil)
  }

  // MARK: Over the wire, through a download on the socket transport

  /// Downloads from a server that answers with `response`, then closes; the outcome and the
  /// bytes of the file.
  func download(
    _ response: [UInt8], retries: Int = 1
  ) async throws -> (Result<HTTPDownload, any Error>, [UInt8]?) {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .raw(response) }
      }) { server in
        let client = server.client(retryPolicy: retries > 1 ? quickRetries(retries) : .none)
        let (result, _) = await outcome(of: client.download("file", to: directory.file()))
        let contents = (try? Data(contentsOf: directory.file())).map { [UInt8]($0) }
        if socketTransportServesLoopback { expectSent(over: .automatic, server.requests) }
        return (result, contents)
      }
    }
  }

  /// The `URLError` inside `result`'s `HTTPError.transport`, recording an issue when there is none.
  func transportError(
    _ result: Result<HTTPDownload, any Error>, sourceLocation: SourceLocation = #_sourceLocation
  ) -> URLError? {
    guard case .failure(let error) = result, case .transport(let urlError, _)? = error as? HTTPError else {
      Issue.record("expected HTTPError.transport, got \(result)", sourceLocation: sourceLocation)
      return nil
    }
    return urlError
  }

  @Test func aDownloadWithAKelvinSignChunkedEncodingIsRefusedNotDechunked() async throws {
    let (result, file) = try await download(
      bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chun\u{212A}ed\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
    #expect(transportError(result)?.code == .cannotDecodeRawData)
    #expect(file == nil)
  }

  @Test func aDownloadWithALongSFieldNameIsRefused() async throws {
    let (result, file) = try await download(
      bytes(
        "HTTP/1.1 200 OK\r\nTran\u{017F}fer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
      ))
    #expect(transportError(result)?.code == .cannotParseResponse)
    #expect(file == nil)
  }

  @Test func aDownloadWithANulInAFieldValueIsRefused() async throws {
    let (result, file) = try await download(
      bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: a") + [0] + bytes("b\r\n\r\nok"))
    let error = transportError(result)
    #expect(error?.code == .cannotParseResponse)
    #expect(error?.localizedDescription == "Nul byte in header")
    #expect(file == nil)
  }

  @Test func aDownloadFramedByChunksIsNotCheckedAgainstItsContentLength() async throws {
    let (result, file) = try await download(
      bytes(
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"))
    #expect(try result.get().byteCount == 5)
    #expect(file == bytes("hello"))
  }

  @Test func aDownloadWithAZeroPaddedChunkSizeIsRead() async throws {
    let (result, file) = try await download(
      bytes(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0000000000000005\r\nhello\r\n0000000000000000\r\n\r\n"
      ))
    #expect(try result.get().byteCount == 5)
    #expect(file == bytes("hello"))
  }

  @Test func aDownloadWithAnOverlongTrailerSectionFails() async throws {
    let trailer = Array(repeating: bytes("X-T: " + String(repeating: "t", count: 1000) + "\r\n"), count: 200)
      .joined()
    let (result, file) = try await download(
      bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n") + trailer
        + bytes("\r\n"))
    let error = transportError(result)
    #expect(error?.code == .cannotParseResponse)
    #expect(error?.localizedDescription.contains("trailer section") == true, "\(String(describing: error))")
    #expect(file == nil)
  }

  /// A download cut after 48 of 100 bytes whose retry is answered `206` for the rest with a
  /// `Content-Length` that overflowed the sum `start + length`; the outcome and requests seen.
  static func resumeWithOverflowingLength() async throws -> (Result<HTTPDownload, any Error>, Int) {
    let body = [UInt8](repeating: UInt8(ascii: "b"), count: 100)
    return try await withDownloadDirectory { directory in
      try await withServer({ router in
        let calls = Counter()
        router.on("GET", "/file") { _ in
          if calls.next() == 1 {
            return .raw(
              bytes("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nETag: \"v1\"\r\n\r\n") + body[..<48])
          }
          return .raw(
            bytes(
              "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 48-99/*\r\nETag: \"v1\"\r\n"
                + "Content-Length: 9223372036854775807\r\n\r\n") + body[48...])
        }
      }) { server in
        let client = server.client(retryPolicy: quickRetries(3))
        let (result, _) = await outcome(of: client.download("file", to: directory.file()))
        return (result, server.requests.count)
      }
    }
  }

  /// The resumed answers, each with sizes at the edges of `Int64`, given to a download cut after
  /// 48 of 100 bytes (and one first answer of that kind).
  static let extremeSizes: [(name: String, first: [UInt8]?, resumed: [UInt8])] = {
    let body = [UInt8](repeating: UInt8(ascii: "b"), count: 100)
    let max = Int64.max
    func partial(_ fields: String, _ rest: [UInt8] = Array(body[48...])) -> [UInt8] {
      bytes("HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\n\(fields)\r\n") + rest
    }
    return [
      (
        "range end at Int64.max - 1", nil,
        partial("Content-Range: bytes 48-\(max - 1)/*\r\nContent-Length: 52\r\n")
      ),
      ("range end at Int64.max", nil, partial("Content-Range: bytes 48-\(max)/*\r\nContent-Length: 52\r\n")),
      ("length of Int64.max", nil, partial("Content-Range: bytes 48-99/*\r\nContent-Length: \(max)\r\n")),
      ("total of Int64.max", nil, partial("Content-Range: bytes 48-99/\(max)\r\nContent-Length: 52\r\n")),
      ("start at Int64.max - 1", nil, partial("Content-Range: bytes \(max - 1)-\(max - 1)/*\r\n")),
      (
        "length beyond Int64", nil,
        partial("Content-Range: bytes 48-99/*\r\nContent-Length: 99999999999999999999\r\n")
      ),
      (
        "a chunk of 2^60 - 1 bytes", nil,
        partial(
          "Content-Range: bytes 48-99/100\r\nTransfer-Encoding: chunked\r\n", bytes("fffffffffffffff\r\nbb"))
      ),
      (
        "first answer of Int64.max bytes",
        bytes("HTTP/1.1 200 OK\r\nETag: \"v1\"\r\nContent-Length: \(max)\r\n\r\n") + body[..<48],
        partial("Content-Range: bytes 48-99/100\r\nContent-Length: 52\r\n")
      ),
    ]
  }()

  /// Runs every case of `extremeSizes` and returns the outcomes that are not a typed error nor a
  /// whole download.
  static func downloadsWithExtremeSizes() async throws -> [String] {
    var unexpected: [String] = []
    for (name, first, resumed) in extremeSizes {
      let body = [UInt8](repeating: UInt8(ascii: "b"), count: 100)
      try await withDownloadDirectory { directory in
        try await withServer({ router in
          let calls = Counter()
          router.on("GET", "/file") { _ in
            calls.next() == 1
              ? .raw(
                first ?? bytes("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nETag: \"v1\"\r\n\r\n") + body[..<48]
              )
              : .raw(resumed)
          }
        }) { server in
          let client = server.client(retryPolicy: quickRetries(2))
          let (result, _) = await outcome(of: client.download("file", to: directory.file()))
          switch result {
          case .success(let download) where download.byteCount == 100:
            break
          case .failure(let error as HTTPError):
            if case .transport = error { break }
            unexpected.append("\(name): \(error)")
          default:
            unexpected.append("\(name): \(result)")
          }
        }
      }
    }
    return unexpected
  }

  @Test(.tags(.childProcess)) func sizesAtTheEdgesOfInt64EndInTypedErrors() async {
    // Every sum of sizes from the server is checked: none may trap (a crash of the process).
    await #expect(processExitsWith: .success) {
      let unexpected = try await HostileResponseTests.downloadsWithExtremeSizes()
      if !unexpected.isEmpty {
        print(unexpected.joined(separator: "\n"))
        exit(1)
      }
    }
  }

  @Test(.tags(.childProcess)) func aResumeAnsweredWithAnOverflowingLengthFailsWithATypedError() async {
    // Before the fix, `start + declared` trapped ("arithmetic overflow") and killed the process.
    await #expect(processExitsWith: .success) {
      let (result, requests) = try await HostileResponseTests.resumeWithOverflowingLength()
      guard case .failure(let error) = result, case .transport(let urlError, _)? = error as? HTTPError,
        urlError.code == .badServerResponse, requests >= 2
      else {
        print("unexpected outcome: \(result), \(requests) requests")
        exit(1)
      }
    }
  }
}
