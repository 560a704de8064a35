import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

/// Servers that break on purpose: every scenario ends in a typed error, within the deadline.
@Suite("Transport faults", .timeLimit(.minutes(1)))
struct TransportFaultTests {
  static let deadline: Duration = .seconds(5)
  static let body = ServerResponse.text(String(repeating: "y", count: 10_000))

  func run(
    _ scenario: String, _ action: ServerAction, limit: Int = 1 << 20, deadline: Duration = Self.deadline
  ) async throws -> (HTTPError?, Duration) {
    try await withServer({ router in
      router.on("GET", "/fault") { _ in action }
    }) { server in
      let client = server.client(timeout: deadline, maximumResponseSize: limit)
      let (result, elapsed) = await outcome(of: client.get("fault"))
      report(scenario, result, elapsed)
      #expect(elapsed < deadline + .seconds(3))
      return (httpError(result), elapsed)
    }
  }

  @Test func anEmptyReplyIsATransportError() async throws {
    let (error, _) = try await run("connection closed before any byte", .closeImmediately)
    guard case .transport? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test func aHeaderValueThatIsNotUTF8IsAParseFailureThatSaysSo() async throws {
    // `X-Name: é` in ISO-8859-1 (one byte, 0xE9), as some servers send non-ASCII field values.
    let response =
      Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Name: ".utf8) + [0xE9]
      + Array("\r\nConnection: close\r\n\r\nok".utf8)
    let (error, _) = try await run("a header field in ISO-8859-1", .raw(response))
    guard case .transport(let urlError, _)? = error else {
      Issue.record("got \(String(describing: error))")
      return
    }
    #expect(urlError.code == .cannotParseResponse)
    #expect(error?.description.contains("accepts only UTF-8") == true, "\(String(describing: error))")
    #expect(!RetryPolicy.default.retryableErrorCodes.contains(urlError.code), "a retry gets the same header")
  }

  /// A response libcurl refuses, as raw bytes, and the code and words its error must have.
  struct Malformed: Sendable, CustomTestStringConvertible {
    let name: String
    let response: [UInt8]
    let code: URLError.Code
    let words: String

    var testDescription: String { name }
  }

  static let malformed: [Malformed] = [
    Malformed(
      name: "a header line of 110 KiB",
      response: Array(
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Big: \(String(repeating: "a", count: 110_000))\r\n\r\nok"
          .utf8),
      code: .cannotParseResponse, words: "over its limit of 100 KiB"),
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
      code: .networkConnectionLost, words: "transfer closed"),
  ]

  @Test(arguments: malformed)
  func aMalformedResponseHasTheCodeItMeansAndSaysWhatHappened(_ row: Malformed) async throws {
    let (error, _) = try await run(row.name, .raw(row.response))
    guard case .transport(let urlError, _)? = error else {
      Issue.record("got \(String(describing: error))")
      return
    }
    #expect(urlError.code == row.code)
    #expect(urlError.localizedDescription.contains(row.words), "\(urlError.localizedDescription)")
  }

  @Test func aResetMidHeadersIsATransportError() async throws {
    let (error, _) = try await run("reset mid-headers", .resetMidHeaders)
    guard case .transport? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test func aResetMidBodyIsATransportError() async throws {
    let (error, _) = try await run("reset mid-body", .resetMidBody(Self.body, afterBytes: 100))
    guard case .transport? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test func aTruncatedBodyIsATransportError() async throws {
    let (error, _) = try await run(
      "truncated body (FIN after 100 of 10000 bytes)", .truncatedBody(Self.body, sendBytes: 100))
    guard case .transport? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test func aContentLengthLargerThanTheBodyTimesOut() async throws {
    let (error, _) = try await run(
      "wrong Content-Length (declared 20000, sent 10000, connection kept open)",
      .wrongContentLength(Self.body, declared: 20_000), deadline: .seconds(1))
    guard case .timedOut? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test func aSmallerContentLengthCutsTheBody() async throws {
    try await withServer({ router in
      router.on("GET", "/fault") { _ in .wrongContentLength(Self.body, declared: 10) }
    }) { server in
      let (result, elapsed) = await outcome(of: server.client(timeout: Self.deadline).get("fault"))
      report("wrong Content-Length (declared 10, sent 10000)", result, elapsed)
      let count = try result.get().body.count
      #expect(count == 10)
    }
  }

  @Test func anOversizeBodyIsRefusedFromItsContentLength() async throws {
    let (error, _) = try await run(
      "oversize body (Content-Length 2 MiB, limit 1 MiB)",
      .respond(.text(String(repeating: "z", count: 2 << 20))))
    guard case .tooLarge(let limit, _)? = error else {
      Issue.record("got \(String(describing: error))"); return
    }
    #expect(limit == 1 << 20)
  }

  @Test func anOversizeChunkedBodyIsCutWhileStreaming() async throws {
    let (error, _) = try await run(
      "oversize chunked body (2 MiB, no Content-Length, limit 1 MiB)",
      .chunked(.text(String(repeating: "z", count: 2 << 20)), chunkSize: 64 << 10))
    guard case .tooLarge? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test func aGzipBombIsCutByDecompressedSize() async throws {
    let (error, _) = try await run(
      "gzip bomb (64 KiB → 64 MiB, limit 1 MiB)", .gzipBomb(decompressedSize: 64 << 20))
    guard case .tooLarge? = error else { Issue.record("got \(String(describing: error))"); return }
  }

  @Test func aChunkedBodyWithinTheLimitArrivesWhole() async throws {
    try await withServer({ router in
      router.on("GET", "/chunked") { _ in .chunked(Self.body, chunkSize: 333) }
    }) { server in
      let count = try await server.client().get("chunked").value.body.count
      #expect(count == 10_000)
    }
  }

  @Test func aHeadForALargeResourceIsNotTooLarge() async throws {
    try await withServer({ router in
      router.on("GET", "/big") { _ in .respond(.text(String(repeating: "z", count: 2 << 20))) }
    }) { server in
      let response = try await server.client(maximumResponseSize: 1 << 20).head("big").value
      #expect(response.headers["content-length"] == "\(2 << 20)")
      #expect(response.body.isEmpty)
    }
  }
}
