import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Bodies sent with a `Content-Encoding`: an ordinary request gets them decoded over both
/// engines, as `URLSession` decodes them; a download keeps what was sent.
@Suite("Content decoding", .timeLimit(.minutes(1)))
struct ContentDecodingTests {
  static let engines: [HTTPClient.Engine] = [.automatic, .urlSession]
  /// 200 KiB of text: more than one stored block, more than one read.
  static let original = Array(
    (0..<5_000).map { "line \($0) of the configuration\n" }.joined().utf8)

  static func encoded(_ coding: String, _ body: [UInt8]) -> ServerAction {
    .respond(ServerResponse(status: 200, headers: [("Content-Encoding", coding)], body: body))
  }

  @Test(arguments: engines)
  func aGzipBodyIsDecoded(engine: HTTPClient.Engine) async throws {
    try await withServer({ router in
      router.on("GET", "/gzip") { _ in Self.encoded("gzip", ContentCodingEncoder.gzip(Self.original)) }
      router.on("GET", "/chunked") { _ in
        .chunked(
          ServerResponse(
            status: 200, headers: [("Content-Encoding", "gzip")],
            body: ContentCodingEncoder.gzip(Self.original)),
          chunkSize: 1_000)
      }
    }) { server async throws in
      let client = server.client(engine: engine)
      let response = try await client.get("gzip").value
      #expect(Array(response.body) == Self.original)
      #expect(response.headers["Content-Encoding"] == "gzip", "the fields say what was sent")
      #expect(try await Array(client.get("chunked").value.body) == Self.original)
      let asked = server.requests.first?.header("Accept-Encoding") ?? ""
      #expect(asked.contains("gzip") && asked.contains("deflate"), "asked: \(asked)")
    }
  }

  @Test(.enabled(if: socketTransportServesLoopback))
  func aBrotliBodyIsDecoded() async throws {
    // "hello" as a brotli stream (`brotli -c`): one uncompressed meta-block.
    let hello: [UInt8] = [0x0B, 0x02, 0x80, 0x68, 0x65, 0x6C, 0x6C, 0x6F, 0x03]
    try await withServer({ router in
      router.on("GET", "/br") { _ in Self.encoded("br", hello) }
    }) { server async throws in
      let response = try await server.client(engine: .automatic).get("br").value
      #expect(response.text == "hello")
      #expect(server.requests.first?.header("Accept-Encoding") == "gzip, deflate, br")
    }
  }

  @Test(arguments: engines)
  func aDeflateBodyIsDecodedWithOrWithoutItsZlibWrapper(engine: HTTPClient.Engine) async throws {
    try await withServer({ router in
      router.on("GET", "/zlib") { _ in Self.encoded("deflate", ContentCodingEncoder.zlib(Self.original)) }
      router.on("GET", "/raw") { _ in Self.encoded("deflate", ContentCodingEncoder.rawDeflate(Self.original))
      }
    }) { server async throws in
      let client = server.client(engine: engine)
      let wrapped = try await client.get("zlib").value
      let raw = try await client.get("raw").value
      #expect(Array(wrapped.body) == Self.original)
      #expect(Array(raw.body) == Self.original)
    }
  }

  @Test(arguments: engines)
  func theSizeLimitCountsDecodedBytes(engine: HTTPClient.Engine) async throws {
    try await withServer({ router in
      router.on("GET", "/gzip") { _ in Self.encoded("gzip", ContentCodingEncoder.gzip(Self.original)) }
    }) { server async throws in
      // The encoded body (stored blocks) is a little larger than the limit allows of the
      // decoded one only by its framing: the decoded 200 KiB are what count.
      let client = server.client(maximumResponseSize: 100_000, engine: engine)
      let (result, _) = await outcome(of: client.get("gzip"))
      guard case .tooLarge(let limit, _)? = httpError(result) else {
        Issue.record("expected tooLarge, got \(result)")
        return
      }
      #expect(limit == 100_000)
    }
  }

  @Test(.enabled(if: socketTransportServesLoopback))
  func aBodyNotInItsDeclaredCodingOrCutShortIsAnError() async throws {
    let gzipped = ContentCodingEncoder.gzip(Self.original)
    try await withServer({ router in
      router.on("GET", "/garbage") { _ in Self.encoded("gzip", Array("not gzip at all".utf8)) }
      router.on("GET", "/cut") { _ in Self.encoded("gzip", Array(gzipped.prefix(gzipped.count / 2))) }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      for path in ["garbage", "cut"] {
        let (result, _) = await outcome(of: client.get(path))
        guard case .transport(let error, _)? = httpError(result) else {
          Issue.record("\(path): expected a transport error, got \(result)")
          continue
        }
        #expect(error.code == .cannotDecodeContentData, "\(path)")
        #expect(error.localizedDescription.contains("not in the Content-Encoding"), "\(path)")
      }
    }
  }

  @Test(.enabled(if: socketTransportServesLoopback))
  func anEncodingNotAskedForIsPassedOnAsSent() async throws {
    try await withServer({ router in
      router.on("GET", "/compress") { _ in Self.encoded("compress", [1, 2, 3]) }
      router.on("GET", "/empty") { _ in Self.encoded("gzip", []) }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      let unknown = try await client.get("compress").value
      let empty = try await client.get("empty").value
      #expect(Array(unknown.body) == [1, 2, 3])
      #expect(empty.body.isEmpty)
    }
  }

  @Test(.enabled(if: socketTransportServesLoopback))
  func aDownloadKeepsTheBodyAsSent() async throws {
    let gzipped = ContentCodingEncoder.gzip(Self.original)
    try await withServer({ router in
      router.on("GET", "/file") { _ in Self.encoded("gzip", gzipped) }
    }) { server async throws in
      let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: directory) }
      let destination = directory.appendingPathComponent("file.gz")
      _ = try await server.client(engine: .automatic).download("file", to: destination).value
      #expect(Array(try Data(contentsOf: destination)) == gzipped)
      #expect(server.requests.first?.header("Accept-Encoding") == "identity")
    }
  }
}
