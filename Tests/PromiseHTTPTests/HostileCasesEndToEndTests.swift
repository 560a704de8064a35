import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The responses issue 30 lists as crashing FoundationNetworking or being accepted by it, sent
/// as raw bytes by a real server and read through `get` and through a download over the socket
/// transport (the default engine): a legal one is read whole, the others end in a typed error.
///
/// curl 7.88.1 on the same bytes (measured 2026-12-06): reads the chunked body with trailers
/// ("hello"); fails `Int64.max` with "transfer closed with 9223372036854775802 bytes remaining";
/// accepts the other four (the last of two lengths, `+5` as 5, `0x10` as 0, `HTTP/2 200` on an
/// HTTP/1.1 connection), which RFC 9112 makes invalid: a length is digits only, two lengths
/// that differ are an error, and an HTTP/1.1 connection answers in HTTP/1.x.
@Suite(
  "Hostile responses end to end", .timeLimit(.minutes(2)),
  .enabled(if: socketTransportServesLoopback, "a proxy in the environment turns the socket transport off"))
struct HostileCasesEndToEndTests {
  /// A response, and what it must give: a body, or a transport error with this code.
  struct Case: Sendable, CustomTestStringConvertible {
    let name: String
    let response: String
    let body: String?
    var code: URLError.Code = .cannotParseResponse
    /// Whether `get` refuses it, before reading the body, as larger than `maximumResponseSize`.
    var tooLargeForGet = false

    var testDescription: String { name }
  }

  static let cases: [Case] = [
    Case(
      name: "a chunked body with trailers (legal, RFC 9112 §7.1.2)",
      response: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"
        + "5\r\nhello\r\n0\r\nX-Checksum: 1\r\n\r\n",
      body: "hello"),
    Case(
      name: "Content-Length: Int64.max, then 5 bytes and the end",
      response: "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\nhello", body: nil,
      code: .networkConnectionLost, tooLargeForGet: true),
    Case(
      name: "two different Content-Lengths",
      response: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", body: nil),
    Case(
      name: "Content-Length: +5", response: "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", body: nil),
    Case(
      name: "Content-Length: 0x10", response: "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\nhello",
      body: nil),
    Case(
      name: "HTTP/2 200 on an HTTP/1.1 connection", response: "HTTP/2 200\r\nContent-Length: 5\r\n\r\nhello",
      body: nil),
  ]

  @Test(arguments: cases)
  func throughGet(_ row: Case) async throws {
    try await withServer({ router in
      router.on("GET", "/hostile") { _ in .raw(Array(row.response.utf8)) }
    }) { server async throws in
      let client = server.client(timeout: .seconds(10), maximumResponseSize: 1 << 20, engine: .automatic)
      let (result, _) = await outcome(of: client.get("hostile"))
      if row.tooLargeForGet {
        guard case .tooLarge(limit: 1 << 20, _)? = httpError(result) else {
          Issue.record("got \(result)")
          return
        }
        return
      }
      check(result.map { String(decoding: $0.body, as: UTF8.self) }, against: row)
    }
  }

  @Test(arguments: cases)
  func throughADownload(_ row: Case) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "HostileCases-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let destination = directory.appendingPathComponent("file")
    try await withServer({ router in
      router.on("GET", "/hostile") { _ in .raw(Array(row.response.utf8)) }
    }) { server async throws in
      let client = server.client(timeout: .seconds(10), engine: .automatic)
      let (result, _) = await outcome(of: client.download("hostile", to: destination))
      let body = result.flatMap { download in
        Result { try String(decoding: Data(contentsOf: download.fileURL), as: UTF8.self) }
      }
      check(body, against: row)
      if row.body == nil {
        #expect(!FileManager.default.fileExists(atPath: destination.path), "no file for a refused answer")
      }
    }
  }

  private func check(
    _ result: Result<String, any Error>, against row: Case, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    switch (result, row.body) {
    case (.success(let body), let expected?):
      #expect(body == expected, sourceLocation: sourceLocation)
    case (.failure(HTTPError.transport(let error, _)), nil):
      #expect(error.code == row.code, "\(error.localizedDescription)", sourceLocation: sourceLocation)
    default:
      Issue.record("got \(result)", sourceLocation: sourceLocation)
    }
  }
}
