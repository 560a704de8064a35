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
      #expect(server.requests.first?.header("Accept-Encoding") == "gzip, deflate, br, zstd")
    }
  }

  /// Zstandard, as libcurl decodes it: a frame of raw blocks (ours, 200 KiB, several blocks),
  /// a frame compressed by the `zstd` tool (`zstd -19 --no-check` of 200 lines, embedded), a
  /// frame that needs a 1 GiB window (refused: at most 8 MiB, RFC 8878), garbage and a frame
  /// cut short (errors). Both engines ask for zstd and decode it (FoundationNetworking's libcurl
  /// asks for "deflate, gzip, br, zstd"); the errors' wording is the socket transport's.
  @Test(arguments: engines)
  func aZstdBodyIsDecodedAndAnUnreasonableWindowRefused(engine: HTTPClient.Engine) async throws {
    let lines = Array((0..<200).map { "line \($0) of the configuration\n" }.joined().utf8)
    let compressed = Self.bytes(
      hex:
        "28b52ffd00685d080076142b14a01b8b01847be1990455702bbbbb7be96bb45a012e0025001f007777676666666656555555554544444444f4ffffab896745030b933843f31c89b1304450204e60308110144ba204ffffffff0b0b0b0b0b0b0b0b0b0befeeeeeeeeaaaaaaaaaa66666666662222222222dedd5ddff77ddff77ddfb66ddbb66ddbb65dd7755dd7755dd7344dd3344dd334fd07fbbeeffbbeeffbaeebbaaeebbaaeeb799ee7799ee7798ee3388ee3388ee31780c8a81110fafdefd05379112404ff2704123f574bb3b3b999595b55cdcdccd6666a6df14bb8ec96c8b25652654b49947d12262f002000000200200000020020502541b24682c80a0990f5111eab23385ec13081618299acc503a40a"
    )
    let raw = ContentCodingEncoder.zstd(Self.original)
    try await withServer({ router in
      router.on("GET", "/raw") { _ in Self.encoded("zstd", raw) }
      router.on("GET", "/compressed") { _ in Self.encoded("zstd", compressed) }
      router.on("GET", "/huge-window") { _ in
        Self.encoded("zstd", ContentCodingEncoder.zstd(lines, windowLog: 30))
      }
      router.on("GET", "/garbage") { _ in Self.encoded("zstd", Array("not zstd at all".utf8)) }
      router.on("GET", "/cut") { _ in Self.encoded("zstd", Array(raw.prefix(raw.count / 2))) }
    }) { server async throws in
      let client = server.client(engine: engine)
      #expect(Array(try await client.get("raw").value.body) == Self.original)
      #expect(Array(try await client.get("compressed").value.body) == lines)
      let asked = server.requests.first?.header("Accept-Encoding") ?? ""
      #expect(asked.contains("zstd"), "asked: \(asked)")
      guard engine == .automatic, socketTransportServesLoopback else { return }
      #expect(asked == "gzip, deflate, br, zstd")
      for (path, reason) in [
        ("huge-window", "Frame requires too much memory"), ("garbage", "Unknown frame descriptor"),
        ("cut", "ended before its coding did"),
      ] {
        let (result, _) = await outcome(of: client.get(path))
        guard case .transport(let error, _)? = httpError(result) else {
          Issue.record("\(path): expected a transport error, got \(result)")
          continue
        }
        #expect(error.code == .cannotDecodeContentData, "\(path)")
        #expect(error.localizedDescription.contains(reason), "\(path): \(error.localizedDescription)")
      }
    }
  }

  static func bytes(hex: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
      let next = hex.index(index, offsetBy: 2)
      bytes.append(UInt8(hex[index..<next], radix: 16)!)
      index = next
    }
    return bytes
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
