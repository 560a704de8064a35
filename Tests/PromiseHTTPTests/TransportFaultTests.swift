import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

/// Servers that break on purpose: every scenario ends in a typed error, within the deadline,
/// over both engines.
@Suite("Transport faults", .timeLimit(.minutes(1)))
struct TransportFaultTests {
  static let deadline: Duration = .seconds(5)
  static let body = ServerResponse.text(String(repeating: "y", count: 10_000))
  /// The socket transport (where it serves the loopback server) and `URLSession`.
  static let engines: [HTTPClient.Engine] = [.automatic, .urlSession]

  func run(
    _ scenario: String, _ action: ServerAction, limit: Int = 1 << 20, deadline: Duration = Self.deadline,
    engine: HTTPClient.Engine
  ) async throws -> (HTTPError?, Duration) {
    try await withServer({ router in
      router.on("GET", "/fault") { _ in action }
    }) { server in
      let client = server.client(timeout: deadline, maximumResponseSize: limit, engine: engine)
      let (result, elapsed) = await outcome(of: client.get("fault"))
      report("\(scenario) [\(engine)]", result, elapsed)
      // No hang: the deadline ends what nothing else would (20 s to spare for a loaded machine).
      #expect(elapsed < deadline + .seconds(20))
      return (httpError(result), elapsed)
    }
  }

  @Test(arguments: engines)
  func anEmptyReplyIsATransportError(engine: HTTPClient.Engine) async throws {
    let (error, _) = try await run("connection closed before any byte", .closeImmediately, engine: engine)
    guard case .transport? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test func aHeaderValueThatIsNotUTF8IsAParseFailureThatSaysSoThroughURLSession() async throws {
    let (error, _) = try await run(
      "a header field in ISO-8859-1", .raw(Self.latin1Response), engine: .urlSession)
    guard case .transport(let urlError, _)? = error else {
      Issue.record("got \(String(describing: error))")
      return
    }
    #expect(urlError.code == .cannotParseResponse)
    #expect(error?.description.contains("accepts only UTF-8") == true, "\(String(describing: error))")
    #expect(!RetryPolicy.default.retryableErrorCodes.contains(urlError.code), "a retry gets the same header")
  }

  @Test(.enabled(if: socketTransportServesLoopback))
  func aHeaderValueThatIsNotUTF8IsReadAsISO88591OverTheSocketTransport() async throws {
    try await withServer({ router in
      router.on("GET", "/fault") { _ in .raw(Self.latin1Response) }
    }) { server in
      let response = try await server.client(engine: .automatic).get("fault").value
      #expect(response.headers["X-Name"] == "\u{E9}")
      #expect(response.text == "ok")
    }
  }

  /// `X-Name: é` in ISO-8859-1 (one byte, 0xE9), as some servers send non-ASCII field values.
  static let latin1Response =
    Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Name: ".utf8) + [0xE9]
    + Array("\r\nConnection: close\r\n\r\nok".utf8)

  /// A malformed response, as raw bytes, and the code and words its error must have over
  /// `URLSession` (libcurl's, explained) and over the socket transport.
  struct Malformed: Sendable, CustomTestStringConvertible {
    let name: String
    let response: [UInt8]
    let code: URLError.Code
    let words: String
    var socketCode: URLError.Code? = nil
    var socketWords: String? = nil

    var testDescription: String { name }
  }

  static let malformed: [Malformed] = [
    Malformed(
      name: "a header line of 110 KiB",
      response: Array(
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Big: \(String(repeating: "a", count: 110_000))\r\n\r\nok"
          .utf8),
      code: .cannotParseResponse, words: "over its limit of 100 KiB",
      socketWords: "The response head is longer than 65536 bytes"),
    Malformed(
      name: "a gzip body that is not gzip",
      response: Array(
        "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\n0123456789".utf8),
      code: .cannotDecodeContentData, words: "not in the Content-Encoding"),
    Malformed(
      name: "a chunk size that is not hexadecimal",
      response: Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nhello\r\n0\r\n\r\n".utf8),
      code: .cannotParseResponse, words: "chunked-encoding"),
    Malformed(
      name: "an answer that is not HTTP", response: Array("SSH-2.0-OpenSSH_9.2\r\n".utf8),
      code: .cannotParseResponse, words: "did not answer in HTTP"),
    Malformed(
      name: "two Content-Length fields, the second longer than the body",
      response: Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok".utf8),
      code: .networkConnectionLost, words: "transfer closed",
      // libcurl takes the last length and waits for a byte that never comes; the socket
      // transport refuses the contradiction.
      socketCode: .cannotParseResponse, socketWords: "given more than once with different values"),
  ]

  @Test(arguments: malformed, engines)
  func aMalformedResponseHasTheCodeItMeansAndSaysWhatHappened(
    _ row: Malformed, engine: HTTPClient.Engine
  ) async throws {
    let (error, _) = try await run(row.name, .raw(row.response), engine: engine)
    guard case .transport(let urlError, _)? = error else {
      Issue.record("got \(String(describing: error))")
      return
    }
    let socket = engine == .automatic && socketTransportServesLoopback
    #expect(urlError.code == (socket ? row.socketCode ?? row.code : row.code))
    let words = socket ? row.socketWords ?? row.words : row.words
    #expect(urlError.localizedDescription.contains(words), "\(urlError.localizedDescription)")
  }

  @Test(arguments: engines)
  func aResetMidHeadersIsATransportError(engine: HTTPClient.Engine) async throws {
    let (error, _) = try await run("reset mid-headers", .resetMidHeaders, engine: engine)
    guard case .transport? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test(arguments: engines)
  func aResetMidBodyIsATransportError(engine: HTTPClient.Engine) async throws {
    let (error, _) = try await run(
      "reset mid-body", .resetMidBody(Self.body, afterBytes: 100), engine: engine)
    guard case .transport? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test(arguments: engines)
  func aTruncatedBodyIsATransportError(engine: HTTPClient.Engine) async throws {
    let (error, _) = try await run(
      "truncated body (FIN after 100 of 10000 bytes)", .truncatedBody(Self.body, sendBytes: 100),
      engine: engine)
    guard case .transport? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test(arguments: engines)
  func aContentLengthLargerThanTheBodyTimesOut(engine: HTTPClient.Engine) async throws {
    let (error, _) = try await run(
      "wrong Content-Length (declared 20000, sent 10000, connection kept open)",
      .wrongContentLength(Self.body, declared: 20_000), deadline: .seconds(1), engine: engine)
    guard case .timedOut? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test(arguments: engines)
  func aSmallerContentLengthCutsTheBody(engine: HTTPClient.Engine) async throws {
    try await withServer({ router in
      router.on("GET", "/fault") { _ in .wrongContentLength(Self.body, declared: 10) }
    }) { server in
      let (result, elapsed) = await outcome(
        of: server.client(timeout: Self.deadline, engine: engine).get("fault"))
      report("wrong Content-Length (declared 10, sent 10000)", result, elapsed)
      let count = try result.get().body.count
      #expect(count == 10)
    }
  }

  @Test(arguments: engines)
  func anOversizeBodyIsRefusedFromItsContentLength(engine: HTTPClient.Engine) async throws {
    let (error, _) = try await run(
      "oversize body (Content-Length 2 MiB, limit 1 MiB)",
      .respond(.text(String(repeating: "z", count: 2 << 20))), engine: engine)
    guard case .tooLarge(let limit, _)? = error else {
      Issue.record("got \(String(describing: error))"); return
    }
    #expect(limit == 1 << 20)
  }

  @Test(arguments: engines)
  func anOversizeChunkedBodyIsCutWhileStreaming(engine: HTTPClient.Engine) async throws {
    let (error, _) = try await run(
      "oversize chunked body (2 MiB, no Content-Length, limit 1 MiB)",
      .chunked(.text(String(repeating: "z", count: 2 << 20)), chunkSize: 64 << 10), engine: engine)
    guard case .tooLarge? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test(arguments: engines)
  func aGzipBombIsCutByDecompressedSize(engine: HTTPClient.Engine) async throws {
    let (error, _) = try await run(
      "gzip bomb (64 KiB → 64 MiB, limit 1 MiB)", .gzipBomb(decompressedSize: 64 << 20), engine: engine)
    guard case .tooLarge? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test(arguments: engines)
  func aChunkedBodyWithinTheLimitArrivesWhole(engine: HTTPClient.Engine) async throws {
    try await withServer({ router in
      router.on("GET", "/chunked") { _ in .chunked(Self.body, chunkSize: 333) }
    }) { server in
      let count = try await server.client(engine: engine).get("chunked").value.body.count
      #expect(count == 10_000)
    }
  }

  @Test(arguments: engines)
  func aHeadForALargeResourceIsNotTooLarge(engine: HTTPClient.Engine) async throws {
    try await withServer({ router in
      router.on("GET", "/big") { _ in .respond(.text(String(repeating: "z", count: 2 << 20))) }
    }) { server in
      let response = try await server.client(maximumResponseSize: 1 << 20, engine: engine).head("big").value
      #expect(response.headers["content-length"] == "\(2 << 20)")
      #expect(response.body.isEmpty)
    }
  }
}
