import Foundation
import LoopbackHTTPServer
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The test server's transfer features, driven by curl (an independent HTTP client) and raw
/// sockets: generated bodies, ranges, transfer faults and uploads consumed without memory.
@Suite("Loopback transfer server", .timeLimit(.minutes(1)))
struct LoopbackTransferServerTests {
  static let body = GeneratedBody(length: 3 << 20 + 12_345, seed: 7)

  // MARK: Generated bodies and checksums

  @Test func aGeneratedBodyIsTheSameForTheSameSeedAndItsSlicesAgree() {
    let body = GeneratedBody(length: 50_000, seed: 11)
    let all = body.allBytes
    #expect(all.count == 50_000)
    #expect(GeneratedBody(length: 50_000, seed: 11).allBytes == all)
    #expect(GeneratedBody(length: 50_000, seed: 12).allBytes != all)
    for range: Range<Int64> in [0..<1, 4095..<4097, 4000..<12_289, 49_999..<50_000, 123..<40_000] {
      #expect(body.bytes(in: range) == Array(all[Int(range.lowerBound)..<Int(range.upperBound)]))
    }
    for offset: Int64 in [0, 1, 4095, 4096, 8191, 49_999] {
      #expect(body.byte(at: offset) == all[Int(offset)])
    }
    #expect(body.bytes(in: 49_990..<60_000).count == 10, "clamped to the body")
    // Blocks are not copies of each other: an offset shifted by a block or by a byte differs.
    #expect(body.bytes(in: 0..<4096) != body.bytes(in: 4096..<8192))
    #expect(body.bytes(in: 1000..<5000) != body.bytes(in: 1001..<5001))
    #expect(Array(body.chunks(ofSize: 7000).joined()) == all)
  }

  @Test func theChecksumDoesNotDependOnHowTheBytesArePieced() {
    let body = GeneratedBody(length: 100_003, seed: 5)
    let all = body.allBytes
    let whole = ByteChecksum(all)
    #expect(whole == body.checksum)
    #expect(whole.byteCount == 100_003)
    for pieceSize in [1, 7, 31, 32, 33, 4097, 65_536] {
      var pieced = ByteChecksum()
      var start = 0
      while start < all.count {
        let end = min(all.count, start + pieceSize)
        pieced.update(all[start..<end])
        start = end
      }
      #expect(pieced == whole, "pieces of \(pieceSize) bytes")
    }
    // Misaligned memory takes the copying path.
    var misaligned = ByteChecksum()
    misaligned.update(all[0..<3])
    misaligned.update(all[3...])
    #expect(misaligned == whole)
    #expect(body.checksum(of: 10..<20_000) == ByteChecksum(all[10..<20_000]))
  }

  @Test func theChecksumNoticesAChangedByteATruncationAnExtensionAndAShift() {
    let all = GeneratedBody(length: 10_000, seed: 9).allBytes
    let whole = ByteChecksum(all)
    var changed = all
    changed[5_000] ^= 0x01
    #expect(ByteChecksum(changed) != whole)
    #expect(ByteChecksum(all.dropLast()) != whole)
    #expect(ByteChecksum(all + [0]) != whole)
    #expect(ByteChecksum([all[0]] + all.dropLast()) != whole)
    var swapped = all
    swapped.swapAt(100, 200)
    #expect(ByteChecksum(swapped) != whole)
  }

  @Test func aBodyWrittenToAFileHasTheBodysChecksum() throws {
    let path = temporaryPath("written")
    defer { unlink(path) }
    let body = GeneratedBody(length: 2 << 20 + 3, seed: 4)
    try body.write(toFile: path)
    #expect(try ByteChecksum(contentsOfFile: path) == body.checksum)
    #expect(throws: LoopbackServerError.self) { _ = try ByteChecksum(contentsOfFile: path + ".missing") }
  }

  // MARK: Downloads

  @Test func aStreamedBodyDownloadsWholeWithItsValidators() async throws {
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        .stream(
          StreamedResponse(
            body: Self.body, etag: "\"v1\"", lastModified: "Tue, 15 Nov 1994 08:12:31 GMT"))
      }
    }) { server in
      let path = temporaryPath("download")
      defer { unlink(path) }
      let result = try await curl(server, "file", output: path)
      #expect(result.exitCode == 0, "\(result.stderr)")
      #expect(result.status == 200)
      #expect(result.header("Content-Length") == String(Self.body.length))
      #expect(result.header("Accept-Ranges") == "bytes")
      #expect(result.header("ETag") == "\"v1\"")
      #expect(result.header("Last-Modified") == "Tue, 15 Nov 1994 08:12:31 GMT")
      #expect(result.header("Content-Type") == "application/octet-stream")
      #expect(try ByteChecksum(contentsOfFile: path) == Self.body.checksum)
    }
  }

  /// A range request, and what it must get.
  struct RangeCase: Sendable, CustomTestStringConvertible {
    let range: String
    let status: Int
    let contentRange: String?
    let bytes: Range<Int64>

    var testDescription: String { "Range: \(range)" }
  }

  static let rangeCases: [RangeCase] = [
    RangeCase(
      range: "bytes=1000-", status: 206, contentRange: "bytes 1000-99999/100000", bytes: 1000..<100_000),
    RangeCase(
      range: "bytes=5000-5999", status: 206, contentRange: "bytes 5000-5999/100000", bytes: 5000..<6000),
    RangeCase(range: "bytes=0-0", status: 206, contentRange: "bytes 0-0/100000", bytes: 0..<1),
    RangeCase(
      range: "bytes=-300", status: 206, contentRange: "bytes 99700-99999/100000", bytes: 99_700..<100_000),
    RangeCase(
      range: "bytes=99000-200000", status: 206, contentRange: "bytes 99000-99999/100000",
      bytes: 99_000..<100_000),
    RangeCase(range: "bytes=-200000", status: 206, contentRange: "bytes 0-99999/100000", bytes: 0..<100_000),
    RangeCase(range: "bytes=100000-", status: 416, contentRange: "bytes */100000", bytes: 0..<0),
    RangeCase(range: "bytes=200000-300000", status: 416, contentRange: "bytes */100000", bytes: 0..<0),
    RangeCase(range: "bytes=-0", status: 416, contentRange: "bytes */100000", bytes: 0..<0),
    // Ignored: several ranges, a malformed one, another unit.
    RangeCase(range: "bytes=0-10,20-30", status: 200, contentRange: nil, bytes: 0..<100_000),
    RangeCase(range: "bytes=20-10", status: 200, contentRange: nil, bytes: 0..<100_000),
    RangeCase(range: "bytes=x-", status: 200, contentRange: nil, bytes: 0..<100_000),
    RangeCase(range: "items=0-10", status: 200, contentRange: nil, bytes: 0..<100_000),
  ]

  @Test(arguments: rangeCases)
  func aRangeGetsItsSliceOr416(_ row: RangeCase) async throws {
    let body = GeneratedBody(length: 100_000, seed: 3)
    try await withServer({ router in
      router.on("GET", "/file") { _ in .stream(StreamedResponse(body: body)) }
    }) { server in
      let path = temporaryPath("range")
      defer { unlink(path) }
      let result = try await curl(server, "file", output: path, ["-H", "Range: \(row.range)"])
      #expect(result.exitCode == 0, "\(result.stderr)")
      #expect(result.status == row.status)
      #expect(result.header("Content-Range") == row.contentRange)
      #expect(result.header("Content-Length") == String(row.bytes.count))
      #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == body.bytes(in: row.bytes))
    }
  }

  /// An `If-Range` value, and whether the range must be honoured.
  struct IfRangeCase: Sendable, CustomTestStringConvertible {
    let ifRange: String
    let honoured: Bool

    var testDescription: String { "If-Range: \(ifRange)" }
  }

  static let ifRangeCases: [IfRangeCase] = [
    IfRangeCase(ifRange: "\"v1\"", honoured: true),
    IfRangeCase(ifRange: "\"v2\"", honoured: false),
    IfRangeCase(ifRange: "W/\"v1\"", honoured: false),
    IfRangeCase(ifRange: "Tue, 15 Nov 1994 08:12:31 GMT", honoured: true),
    IfRangeCase(ifRange: "Tue, 15 Nov 1994 08:12:32 GMT", honoured: false),
  ]

  @Test(arguments: ifRangeCases)
  func anIfRangeThatDoesNotMatchGetsTheWholeBody(_ row: IfRangeCase) async throws {
    let body = GeneratedBody(length: 20_000, seed: 3)
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        .stream(StreamedResponse(body: body, etag: "\"v1\"", lastModified: "Tue, 15 Nov 1994 08:12:31 GMT"))
      }
    }) { server in
      let result = try await curl(
        server, "file", ["-H", "Range: bytes=100-", "-H", "If-Range: \(row.ifRange)"])
      #expect(result.exitCode == 0, "\(result.stderr)")
      #expect(result.status == (row.honoured ? 206 : 200))
      #expect(result.downloaded == (row.honoured ? 19_900 : 20_000))
    }
  }

  @Test func aWeakETagNeverSatisfiesIfRange() async throws {
    let body = GeneratedBody(length: 20_000, seed: 3)
    try await withServer({ router in
      router.on("GET", "/file") { _ in .stream(StreamedResponse(body: body, etag: "W/\"v1\"")) }
    }) { server in
      let result = try await curl(server, "file", ["-H", "Range: bytes=100-", "-H", "If-Range: W/\"v1\""])
      #expect(result.status == 200)
      #expect(result.downloaded == 20_000)
    }
  }

  @Test func aHeadRequestGetsTheHeadersOnlyAndRangesApplyToGetOnly() async throws {
    try await withServer({ router in
      router.on("GET", "/file") { _ in .stream(StreamedResponse(body: Self.body)) }
      router.on("POST", "/file") { _ in .stream(StreamedResponse(body: Self.body)) }
    }) { server in
      let head = try await curl(server, "file", ["-I", "-H", "Range: bytes=10-"])
      #expect(head.status == 200)
      #expect(head.header("Content-Length") == String(Self.body.length))
      #expect(head.downloaded == 0)
      let post = try await curl(server, "file", ["-X", "POST", "-H", "Range: bytes=10-"])
      #expect(post.status == 200)
      #expect(post.downloaded == Self.body.length)
    }
  }

  @Test func chunkedAndCloseDelimitedBodiesArriveWhole() async throws {
    try await withServer({ router in
      router.on("GET", "/chunked") { _ in
        .stream(StreamedResponse(body: Self.body, framing: .chunked, writeSize: 100_000))
      }
      router.on("GET", "/until-close") { _ in .stream(StreamedResponse(body: Self.body, framing: .untilClose))
      }
    }) { server in
      let path = temporaryPath("framed")
      defer { unlink(path) }
      let chunked = try await curl(server, "chunked", output: path)
      #expect(chunked.exitCode == 0, "\(chunked.stderr)")
      #expect(chunked.header("Transfer-Encoding") == "chunked")
      #expect(chunked.header("Content-Length") == nil)
      #expect(try ByteChecksum(contentsOfFile: path) == Self.body.checksum)

      let ranged = try await curl(server, "chunked", output: path, ["-H", "Range: bytes=1000000-"])
      #expect(ranged.status == 206)
      #expect(try ByteChecksum(contentsOfFile: path) == Self.body.checksum(of: 1_000_000..<Self.body.length))

      let untilClose = try await curl(server, "until-close", output: path)
      #expect(untilClose.exitCode == 0, "\(untilClose.stderr)")
      #expect(untilClose.header("Content-Length") == nil)
      #expect(untilClose.header("Connection") == "close")
      #expect(try ByteChecksum(contentsOfFile: path) == Self.body.checksum)
    }
  }

  @Test func aStreamedResponseKeepsTheConnectionAlive() async throws {
    let body = GeneratedBody(length: 300_000, seed: 1)
    try await withServer({ router in
      router.on("GET", "/file") { _ in .stream(StreamedResponse(body: body)) }
    }) { server in
      let url = server.baseURL.appendingPathComponent("file").absoluteString
      let result = try await curl(server, "file", [url, "-o", "/dev/null"])
      #expect(result.exitCode == 0, "\(result.stderr)")
      #expect(server.requests.map(\.connectionNumber) == [1, 1])
    }
  }

  /// Downloads a large generated body with curl to /dev/null and reports the rate; the server's
  /// memory must stay flat. `LOOPBACK_THROUGHPUT_BYTES` sets the size (64 MiB when memory is
  /// measured, 4 MiB in the whole suite, where generating the body under a sanitizer would load
  /// both cores for tens of seconds; the
  /// Benchmarks executable measures 1 GiB).
  @Test func aLargeBodyStreamsFastWithFlatMemory() async throws {
    let size =
      ProcessInfo.processInfo.environment["LOOPBACK_THROUGHPUT_BYTES"].flatMap(Int64.init)
      ?? (MemoryMeasurement.isMeaningful ? 64 << 20 : 4 << 20)
    let body = GeneratedBody(length: size, seed: 99)
    try await withServer({ router in
      router.on("GET", "/big") { _ in .stream(StreamedResponse(body: body)) }
    }) { server in
      let sampler = ResidentMemorySampler()
      let result = try await curl(server, "big")
      let growth = sampler.stop()
      #expect(result.exitCode == 0, "\(result.stderr)")
      #expect(result.downloaded == size)
      print(
        "THROUGHPUT | \(size >> 20) MiB generated body to curl | \(Int(result.speed / 1e6)) MB/s"
          + " | peak RSS growth \(growth >> 20) MiB")
      if MemoryMeasurement.isMeaningful {
        #expect(growth < 16 << 20, "resident memory grew by \(growth) bytes")
      }
    }
  }

  // MARK: Transfer faults

  @Test func closeAfterEndsTheBodyEarlyWithAFin() async throws {
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        .stream(StreamedResponse(body: Self.body, faults: [.closeAfter(bytes: 100_000)]))
      }
    }) { server in
      let result = try await curl(server, "file")
      #expect(result.exitCode == 18, "partial file: \(result.stderr)")
      #expect(result.header("Content-Length") == String(Self.body.length))
      #expect(result.downloaded == 100_000)
    }
  }

  @Test func resetAfterEndsTheBodyEarlyWithAReset() async throws {
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        .stream(StreamedResponse(body: Self.body, faults: [.resetAfter(bytes: 100_000)]))
      }
    }) { server in
      let result = try await curl(server, "file")
      #expect(result.exitCode == 56, "receive failure: \(result.stderr)")
      #expect(result.stderr.contains("reset"), "\(result.stderr)")
      #expect(result.downloaded == 100_000)
    }
  }

  @Test func theFirstAttemptCanBeCutAndTheSecondResumeIt() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        let faults: [TransferFault] = calls.next() == 1 ? [.closeAfter(bytes: 1 << 20)] : []
        return .stream(StreamedResponse(body: Self.body, etag: Self.body.etag, faults: faults))
      }
    }) { server in
      let path = temporaryPath("resume")
      defer { unlink(path) }
      let first = try await curl(server, "file", output: path)
      #expect(first.exitCode == 18)
      // curl's `-C -` asks for the rest of the file it has.
      let second = try await curl(server, "file", output: path, ["-C", "-"])
      #expect(second.exitCode == 0, "\(second.stderr)")
      #expect(second.status == 206)
      #expect(server.requests.last?.header("Range") == "bytes=1048576-")
      #expect(try ByteChecksum(contentsOfFile: path) == Self.body.checksum)
    }
  }

  @Test func ignoreRangeAlwaysSendsTheWholeBody() async throws {
    try await withServer({ router in
      router.on("GET", "/file") { _ in .stream(StreamedResponse(body: Self.body, faults: [.ignoreRange])) }
    }) { server in
      let result = try await curl(server, "file", ["-H", "Range: bytes=1000-"])
      #expect(result.status == 200)
      #expect(result.header("Accept-Ranges") == nil)
      #expect(result.header("Content-Range") == nil)
      #expect(result.downloaded == Self.body.length)
    }
  }

  @Test func wrongRangeStartSendsAnotherRangeThanAskedFor() async throws {
    let body = GeneratedBody(length: 100_000, seed: 3)
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        .stream(StreamedResponse(body: body, faults: [.wrongRangeStart(by: 500)]))
      }
    }) { server in
      let path = temporaryPath("shifted")
      defer { unlink(path) }
      let result = try await curl(server, "file", output: path, ["-H", "Range: bytes=1000-"])
      #expect(result.status == 206)
      #expect(result.header("Content-Range") == "bytes 1500-99999/100000")
      #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == body.bytes(in: 1500..<100_000))
    }
  }

  @Test func aLongerContentLengthThanTheBodyEndsInAShortBody() async throws {
    let body = GeneratedBody(length: 100_000, seed: 3)
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        .stream(StreamedResponse(body: body, faults: [.wrongContentLength(by: 100)]))
      }
    }) { server in
      let result = try await curl(server, "file")
      #expect(result.exitCode == 18, "partial file: \(result.stderr)")
      #expect(result.header("Content-Length") == "100100")
      #expect(result.downloaded == 100_000)
    }
  }

  @Test func aShorterContentLengthThanTheBodyEndsTheConnectionAfterIt() async throws {
    let body = GeneratedBody(length: 100_000, seed: 3)
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        .stream(StreamedResponse(body: body, faults: [.wrongContentLength(by: -100)]))
      }
    }) { server in
      let path = temporaryPath("short")
      defer { unlink(path) }
      let result = try await curl(server, "file", output: path)
      #expect(result.header("Content-Length") == "99900")
      #expect(try Array(Data(contentsOf: URL(fileURLWithPath: path))) == body.bytes(in: 0..<99_900))
      // Over a raw socket that stays open: all 100 000 bytes come, then the server closes.
      let request = "GET /file HTTP/1.1\r\nHost: x\r\n\r\n"
      let (answer, closed) = try await blockingWork {
        try RawConnection.exchange(port: server.server.port, send: Array(request.utf8), closingSend: false)
      }
      #expect(closed, "the server closed the connection")
      let bodyStart = try #require(answer.firstRange(of: Array("\r\n\r\n".utf8))).upperBound
      #expect(Array(answer[bodyStart...]) == body.allBytes)
    }
  }

  @Test func dripSendsTheBodySlowlyAndStopEndsItAtOnce() async throws {
    let body = GeneratedBody(length: 5_000, seed: 3)
    try await withServer({ router in
      router.on("GET", "/drip") { _ in
        .stream(StreamedResponse(body: body, faults: [.drip(chunkSize: 1_000, interval: .milliseconds(40))]))
      }
      router.on("GET", "/stuck") { _ in
        .stream(StreamedResponse(body: body, faults: [.drip(chunkSize: 1_000, interval: .seconds(300))]))
      }
    }) { server in
      let start = ContinuousClock.now
      let dripped = try await curl(server, "drip")
      #expect(dripped.exitCode == 0)
      #expect(dripped.downloaded == 5_000)
      #expect(ContinuousClock.now - start >= .milliseconds(200), "five pauses of 40 ms")

      async let stuck = curl(server, "stuck")
      #expect(await server.arrived(2))
      let stopping = ContinuousClock.now
      await offThePool { server.server.stop() }
      #expect(ContinuousClock.now - stopping < .seconds(60), "the 300 s pause was cut short")
      let result = try await stuck
      #expect(result.exitCode != 0)
      #expect(result.downloaded == 0)
    }
  }

  @Test func changingETagMakesEveryIfRangeFail() async throws {
    let body = GeneratedBody(length: 20_000, seed: 3)
    try await withServer({ router in
      router.on("GET", "/file") { _ in
        .stream(StreamedResponse(body: body, etag: "\"v\"", faults: [.changingETag]))
      }
    }) { server in
      let first = try await curl(server, "file")
      let tag = try #require(first.header("ETag"))
      #expect(tag.hasPrefix("\"v-") && tag.hasSuffix("\""), "\(tag)")
      let second = try await curl(server, "file", ["-H", "Range: bytes=100-", "-H", "If-Range: \(tag)"])
      #expect(second.status == 200)
      #expect(second.downloaded == 20_000)
      #expect(second.header("ETag") != tag)
    }
  }

  // MARK: Uploads

  @Test func aLargeUploadIsConsumedWithFlatMemory() async throws {
    // 64 MiB when memory is measured (alone); 4 MiB in the whole suite (see above).
    let body = GeneratedBody(length: MemoryMeasurement.isMeaningful ? 64 << 20 : 4 << 20, seed: 21)
    let path = temporaryPath("upload")
    defer { unlink(path) }
    try body.write(toFile: path)
    try await withServer({ router in
      router.on("PUT", "/upload", body: { _ in .consume() }) { request in
        .respond(.text("\(request.consumedBody?.checksum.description ?? "none")"))
      }
    }) { server in
      let sampler = ResidentMemorySampler()
      let result = try await curl(server, "upload", ["-T", path])
      let growth = sampler.stop()
      #expect(result.exitCode == 0, "\(result.stderr)")
      #expect(result.status == 200)
      let request = try #require(server.requests.first)
      #expect(request.body.count == 0)
      #expect(request.consumedBody?.byteCount == body.length)
      #expect(request.consumedBody?.checksum == body.checksum)
      #expect(request.consumedBody?.isComplete == true)
      print("UPLOAD | \(body.length >> 20) MiB consumed | peak RSS growth \(growth >> 20) MiB")
      if MemoryMeasurement.isMeaningful {
        #expect(growth < 16 << 20, "resident memory grew by \(growth) bytes")
      }
    }
  }

  @Test func aChunkedUploadIsConsumedAndSavedToAFile() async throws {
    let source = temporaryPath("chunked-source")
    let saved = temporaryPath("chunked-saved")
    defer {
      unlink(source)
      unlink(saved)
    }
    try Self.body.write(toFile: source)
    try await withServer({ router in
      router.on("POST", "/upload", body: { _ in .consume(savingTo: saved) }) { _ in .respond(.text("ok")) }
    }) { server in
      let result = try await curl(
        server, "upload",
        ["--data-binary", "@\(source)", "-H", "Transfer-Encoding: chunked", "-H", "Expect: 100-continue"])
      #expect(result.exitCode == 0, "\(result.stderr)")
      #expect(result.status == 200)
      let consumed = try #require(server.requests.first?.consumedBody)
      #expect(consumed.byteCount == Self.body.length)
      #expect(consumed.checksum == Self.body.checksum)
      #expect(consumed.savedPath == saved)
      #expect(try ByteChecksum(contentsOfFile: saved) == Self.body.checksum)
      #expect(server.requests.first?.header("Transfer-Encoding") == "chunked")
    }
  }

  @Test func aSmallBodyIsStillBufferedOnOtherRoutes() async throws {
    try await withServer({ router in
      router.on("POST", "/echo") { request in .respond(.text(request.bodyText)) }
      router.on("POST", "/count", body: { _ in .consume() }) { _ in .respond(.text("ok")) }
    }) { server in
      _ = try await curl(server, "echo", ["--data-binary", "hello"])
      _ = try await curl(server, "count", ["--data-binary", "hello"])
      let requests = server.requests
      #expect(requests.first?.bodyText == "hello")
      #expect(requests.first?.consumedBody == nil)
      #expect(requests.last?.body.count == 0)
      #expect(requests.last?.consumedBody?.checksum == ByteChecksum(Array("hello".utf8)))
    }
  }

  @Test func respondBeforeBodyAnswersWithoutReadingTheUpload() async throws {
    let source = temporaryPath("early-source")
    defer { unlink(source) }
    try Self.body.write(toFile: source)
    try await withServer({ router in
      router.on(
        "PUT", "/upload", body: { _ in .respondBeforeBody(.respond(.text("too large", status: 413))) }
      ) { _ in
        Issue.record("the handler must not run")
        return .respond(.text("read"))
      }
    }) { server in
      let result = try await curl(server, "upload", ["-T", source, "-H", "Expect: 100-continue"])
      #expect(result.status == 413)
      #expect(result.header("Connection") == "close")
      let request = try #require(server.requests.first)
      #expect(request.body.count == 0)
      #expect(request.consumedBody == nil)
      #expect(request.header("Content-Length") == String(Self.body.length))

      // A client that never sends the body still gets the answer, without `100 Continue`, and
      // the close: a server waiting for the body would hold the connection open.
      let head = "PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n"
      let (answer, closed) = try await blockingWork {
        try RawConnection.exchange(port: server.server.port, send: Array(head.utf8), closingSend: false)
      }
      #expect(closed)
      #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 413 "))
    }
  }

  @Test func cutResetsTheConnectionMidUploadAndAnotherAttemptCanSucceed() async throws {
    let source = temporaryPath("cut-source")
    defer { unlink(source) }
    try Self.body.write(toFile: source)
    let calls = Counter()
    try await withServer({ router in
      router.on(
        "PUT", "/upload", body: { _ in calls.next() == 1 ? .cut(afterBytes: 100_000) : .consume() }
      ) { _ in .respond(.text("ok")) }
    }) { server in
      let first = try await curl(server, "upload", ["-T", source])
      #expect(first.exitCode != 0, "curl: \(first.exitCode)")
      #expect(first.status < 200, "no final answer (at most 100 Continue)")
      let cut = try #require(server.requests.first?.consumedBody)
      #expect(cut.byteCount == 100_000)
      #expect(cut.checksum == Self.body.checksum(of: 0..<100_000))
      #expect(cut.isComplete == false)

      let second = try await curl(server, "upload", ["-T", source])
      #expect(second.exitCode == 0, "\(second.stderr)")
      #expect(server.requests.last?.consumedBody?.checksum == Self.body.checksum)
    }
  }

  @Test func anUploadTheClientAbandonsIsRecordedAsIncomplete() async throws {
    try await withServer({ router in
      router.on("PUT", "/upload", body: { _ in .consume() }) { _ in
        Issue.record("the handler must not run")
        return .respond(.text("ok"))
      }
    }) { server in
      let head = "PUT /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n"
      _ = try await blockingWork {
        try RawConnection.exchange(
          port: server.server.port, send: Array(head.utf8) + [UInt8](repeating: 7, count: 300))
      }
      #expect(await server.arrived(1))
      let consumed = try #require(server.requests.first?.consumedBody)
      #expect(consumed.byteCount == 300)
      #expect(consumed.isComplete == false)
      #expect(consumed.checksum == ByteChecksum([UInt8](repeating: 7, count: 300)))
    }
  }

  @Test func aBrokenChunkedUploadIsRefusedWith400() async throws {
    try await withServer({ router in
      router.on("POST", "/upload", body: { _ in .consume() }) { _ in .respond(.text("ok")) }
    }) { server in
      let request =
        "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nhello\r\n0\r\n\r\n"
      let answer = try await blockingWork {
        try RawConnection.exchange(port: server.server.port, send: Array(request.utf8))
      }
      #expect(String(decoding: answer.bytes, as: UTF8.self).hasPrefix("HTTP/1.1 400 "))
      #expect(server.requests.isEmpty)
    }
  }
}

// MARK: - Helpers

/// Returns a fresh path in the temporary directory (nothing is created there).
private func temporaryPath(_ name: String) -> String {
  FileManager.default.temporaryDirectory.appendingPathComponent("loopback-\(name)-\(UUID().uuidString)").path
}

/// What one curl run did: its exit code, and the last response's status, headers and size.
private struct CurlResult: Sendable {
  let exitCode: Int32
  /// The last response's status (0 when none arrived).
  let status: Int
  let headers: [(String, String)]
  let downloaded: Int64
  /// Bytes per second, as curl measured them.
  let speed: Double
  let stderr: String

  /// Returns the value of the last response's first header with this name, case-insensitively.
  func header(_ name: String) -> String? {
    headers.first { $0.0.lowercased() == name.lowercased() }?.1
  }
}

/// Runs curl against `path` on `server`, writing the body to `output`, with extra arguments.
private func curl(
  _ server: TestServer, _ path: String, output: String = "/dev/null", _ arguments: [String] = []
) async throws -> CurlResult {
  let headerFile = temporaryPath("headers")
  defer { unlink(headerFile) }
  let url = server.baseURL.appendingPathComponent(path).absoluteString
  let all =
    [
      "-sS", "--noproxy", "*", "--max-time", "30", "-D", headerFile, "-o", output, "-w",
      "%{http_code} %{size_download} %{speed_download}\\n", url,
    ]
    + arguments
  // curl gives up after 30 s (`--max-time`); the run's own limit is a backstop.
  let outcome = try await blockingWork { try ChildProcess.run("/usr/bin/curl", all, timeout: .seconds(60)) }
  var exitCode: Int32 = -1  // killed (or timed out): no exit code of curl's
  var err = outcome.standardErrorText
  if case .exited(let status) = outcome.termination, !outcome.timedOut {
    exitCode = status
  } else {
    err += "curl \(outcome.summary)\n"
  }
  let out = outcome.standardOutputText
  let fields = out.split(separator: "\n").last?.split(separator: " ") ?? []
  // The header file holds every response's head (100 Continue included): keep the last one.
  let text = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
  let lastHead = text.components(separatedBy: "\r\n\r\n").last { $0.hasPrefix("HTTP/") } ?? ""
  let headers = lastHead.components(separatedBy: "\r\n").dropFirst().compactMap { line -> (String, String)? in
    guard let colon = line.firstIndex(of: ":") else { return nil }
    return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
  }
  return CurlResult(
    exitCode: exitCode, status: fields.first.flatMap { Int($0) } ?? 0, headers: headers,
    downloaded: fields.count > 1 ? Int64(fields[1]) ?? -1 : -1,
    speed: fields.count > 2 ? Double(fields[2]) ?? 0 : 0,
    stderr: err)
}

/// Runs blocking, throwing work on a thread of its own (see `offThePool`).
private func blockingWork<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
  try await withCheckedThrowingContinuation { continuation in
    DispatchQueue(label: "LoopbackTransferServerTests.blocking").async {
      continuation.resume(with: Result { try work() })
    }
  }
}

/// Samples this process's resident memory every millisecond on a thread until stopped.
private final class ResidentMemorySampler: @unchecked Sendable {
  // Safety: `peak` and `running` are read and written only while `lock` is held; `baseline`
  // is set before the thread starts.
  private let lock = NSLock()
  private var peak = 0
  private var running = true
  private let baseline: Int
  private let done = DispatchSemaphore(value: 0)

  init() {
    baseline = Self.residentBytes()
    peak = baseline
    Thread { [self] in
      while true {
        let now = Self.residentBytes()
        lock.lock()
        peak = max(peak, now)
        let going = running
        lock.unlock()
        if !going { break }
        usleep(1_000)
      }
      done.signal()
    }.start()
  }

  /// Stops sampling and returns the peak growth over the baseline, in bytes.
  func stop() -> Int {
    lock.lock()
    running = false
    lock.unlock()
    done.wait()
    lock.lock()
    defer { lock.unlock() }
    return max(0, max(peak, Self.residentBytes()) - baseline)
  }

  /// Resident bytes now, from the second field of `/proc/self/statm` (pages).
  static func residentBytes() -> Int {
    let fd = open("/proc/self/statm", O_RDONLY)
    guard fd >= 0 else { return 0 }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, 128) }
    guard n > 0 else { return 0 }
    let fields = String(decoding: buffer[0..<n], as: UTF8.self).split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * sysconf(Int32(_SC_PAGESIZE))
  }
}

/// A blocking client socket for requests curl cannot send.
private enum RawConnection {
  /// Connects to 127.0.0.1:`port`, sends `bytes`, closes the sending side (unless told not to),
  /// and returns everything received until the server closes or 5 s pass without input, and
  /// whether the server closed.
  static func exchange(port: Int, send bytes: [UInt8], closingSend: Bool = true) throws -> (
    bytes: [UInt8], closed: Bool
  ) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    if closingSend { shutdown(fd, Int32(SHUT_WR)) }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
      let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if n <= 0 { return (received, n == 0) }
      received += buffer[0..<n]
    }
  }
}
