import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

/// `HTTPClient.stream` against the loopback server: chunks, lines, memory, retries, deadlines,
/// cancellation.
@Suite("Streaming responses", .timeLimit(.minutes(1)))
struct StreamingTests {
  /// `count` bytes of a pattern that does not repeat every 256 bytes (a 4093-byte block, cheap
  /// to repeat in a debug build).
  static func pattern(_ count: Int) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count)
    while bytes.count < count { bytes.append(contentsOf: block.prefix(count - bytes.count)) }
    return bytes
  }

  private static let block: [UInt8] = (0..<4093).map {
    UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13)
  }

  /// A client whose origin allows one request at a time, so a held slot shows.
  static func oneAtATime(_ server: TestServer, timeout: Duration = .seconds(30)) -> HTTPClient {
    HTTPClient(
      baseURL: server.baseURL,
      configuration: .init(retryPolicy: .none, timeout: timeout, maximumConcurrentRequestsPerHost: 1))
  }

  /// A body that would take about 60 s to arrive: 600 chunks of 1000 bytes (no newline), 100 ms
  /// apart. The connection stays open after it (keep-alive): only the client closes it early,
  /// and the server's `stop()` cuts it short.
  static let drip = ServerAction.trickle(
    ServerResponse(body: Array(repeating: 0x78, count: 600_000)), chunkSize: 1000,
    interval: .milliseconds(100))

  // MARK: Chunks

  @Test func theBodyArrivesInChunksAndWhole() async throws {
    let body = Self.pattern(3 << 20)
    try await withServer({ router in
      router.on("GET", "/big") { _ in .respond(ServerResponse(body: body)) }
    }) { server in
      // The body is not held whole, so `maximumResponseSize` does not apply to it.
      let client = server.client(maximumResponseSize: 1024)
      let response = try await client.stream("big").value
      #expect(response.statusCode == 200)
      #expect(response.headers["Content-Length"] == "\(body.count)")
      var received = Data()
      var chunks = 0
      for try await chunk in response.body {
        received.append(chunk)
        chunks += 1
      }
      #expect(received == Data(body))
      #expect(chunks > 1)
    }
  }

  @Test func anEmptyBodyEndsAtOnce() async throws {
    try await withServer({ router in
      router.on("GET", "/empty") { _ in .respond(ServerResponse(status: 200)) }
      router.on("GET", "/none") { _ in .respond(ServerResponse(status: 204)) }
    }) { server in
      let client = server.client()
      for path in ["empty", "none"] {
        let response = try await client.stream(path).value
        var lines: [String] = []
        for try await line in response.lines { lines.append(line) }
        #expect(lines.isEmpty)
      }
    }
  }

  @Test func aHeadRequestIsDeliveredWithAnEmptyBody() async throws {
    try await withServer({ router in
      router.on("HEAD", "/big") { _ in .respond(ServerResponse(body: Array(repeating: 0x61, count: 500))) }
    }) { server in
      let response = try await server.client().stream(HTTPRequest(method: .head, path: "big")).value
      #expect(response.statusCode == 200)
      var count = 0
      for try await chunk in response.body { count += chunk.count }
      #expect(count == 0)
    }
  }

  @Test func aChunkedBodyArrivesWhole() async throws {
    let body = Self.pattern(300_000)
    try await withServer({ router in
      router.on("GET", "/chunked") { _ in .chunked(ServerResponse(body: body), chunkSize: 333) }
    }) { server in
      let response = try await server.client().stream("chunked").value
      #expect(response.headers["Transfer-Encoding"] == "chunked")
      var received = Data()
      for try await chunk in response.body { received.append(chunk) }
      #expect(received == Data(body))
    }
  }

  @Test func aGzipBodyArrivesDecompressedThroughTheSession() async throws {
    try await withServer({ router in
      router.on("GET", "/gzip") { _ in .gzipBomb(decompressedSize: 2 << 20) }
    }) { server in
      let client = server.client(maximumResponseSize: 1024, engine: .urlSession)
      let response = try await client.stream("gzip").value
      #expect(response.headers["Content-Encoding"] == "gzip")
      var count = 0
      var zeros = true
      for try await chunk in response.body {
        count += chunk.count
        zeros = zeros && chunk == Data(count: chunk.count)
      }
      #expect(count == 2 << 20)
      #expect(zeros)
    }
  }

  @Test func overASocketNoEncodingIsAskedForAndAnEncodedBodyArrivesAsSent() async throws {
    try await withServer({ router in
      router.on("GET", "/gzip") { _ in .gzipBomb(decompressedSize: 2 << 20) }
    }) { server in
      let response = try await server.client(maximumResponseSize: 1024, engine: .automatic).stream("gzip")
        .value
      #expect(server.requests.last?.header("Accept-Encoding") == "identity")
      #expect(response.headers["Content-Encoding"] == "gzip")
      var received = Data()
      for try await chunk in response.body { received.append(chunk) }
      // The gzip member as the server sent it: its magic bytes, far fewer bytes than 2 MiB.
      #expect(received.prefix(2) == Data([0x1F, 0x8B]))
      #expect(received.count < 64 << 10)
    }
  }

  // MARK: Memory

  @Test func overASocketASlowReaderHoldsTheServerBackWithNothingSpilled() async throws {
    let body = Self.pattern(8 << 20)
    let bufferSize = 256 << 10
    try await withServer({ router in
      router.on("GET", "/big") { _ in .respond(ServerResponse(body: body)) }
    }) { server in
      let response = try await server.client(engine: .automatic).stream(
        HTTPRequest(path: "big"), bufferSize: bufferSize, spillLimit: 1 << 20, file: #fileID, line: #line
      ).value
      let stream = response.body.lifetime.stream
      var iterator = response.body.makeAsyncIterator()
      var received = try await iterator.next() ?? Data()
      // The reader stops: the socket's thread fills the buffer, then waits for room.
      #expect(await eventually { stream.writerIsWaiting })
      let counters = stream.counters
      #expect(counters.received < Int64(body.count))
      #expect(counters.memory <= bufferSize)
      while let chunk = try await iterator.next() { received.append(chunk) }
      #expect(received == Data(body))
      // A reader 8 MiB behind with a 1 MiB spill limit: nothing ever went to the file.
      #expect(stream.counters.spilled == 0)
      #expect(stream.counters.peakMemory <= bufferSize)
    }
  }

  @Test func aSlowReaderKeepsAtMostTheBufferSizeInMemoryAndGetsEveryByte() async throws {
    let body = Self.pattern(8 << 20)
    let bufferSize = 256 << 10
    try await withServer({ router in
      router.on("GET", "/big") { _ in .respond(ServerResponse(body: body)) }
    }) { server in
      let response = try await server.client(engine: .urlSession).stream(
        HTTPRequest(path: "big"), bufferSize: bufferSize, spillLimit: 1 << 30, file: #fileID, line: #line
      ).value
      let stream = response.body.lifetime.stream
      var iterator = response.body.makeAsyncIterator()
      var received = try await iterator.next() ?? Data()
      // The reader stops until the server has sent everything, as fast as it could.
      #expect(await eventually { stream.counters.received == Int64(body.count) })
      let counters = stream.counters
      #expect(counters.peakMemory <= bufferSize)
      #expect(counters.spilled >= Int64(body.count - bufferSize - received.count))
      while let chunk = try await iterator.next() { received.append(chunk) }
      #expect(received == Data(body))
      #expect(stream.counters.memory == 0)
    }
  }

  @Test func aReaderTooFarBehindFailsTheStreamAndCancelsTheRequest() async throws {
    let body = Self.pattern(8 << 20)
    try await withServer({ router in
      router.on("GET", "/big") { _ in .respond(ServerResponse(body: body)) }
    }) { server in
      let response = try await server.client(engine: .urlSession).stream(
        HTTPRequest(path: "big"), bufferSize: 64 << 10, spillLimit: 1 << 20, file: #fileID, line: #line
      ).value
      let stream = response.body.lifetime.stream
      #expect(await eventually { stream.counters.received > (1 << 20) + (64 << 10) })
      var received = 0
      await #expect(throws: HTTPStreamError.readerFellBehind(limit: 1 << 20)) {
        for try await chunk in response.body { received += chunk.count }
      }
      #expect(received <= (1 << 20) + (64 << 10))
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }

  /// The resident memory of the process, from `/proc/self/status`, in MiB.
  static func residentMiB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
      let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
      let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
    else { return -1 }
    return kilobytes / 1024
  }

  /// A measurement, not a check (run with `PROMISEHTTP_STREAM_MEASURE=1`): 64 MiB sent as fast
  /// as the server can to a reader that waits until all of it has arrived, with the default
  /// 1 MiB buffer (twice: the first run also pays for the server's own buffers) and with an
  /// unbounded one; prints the resident memory at each step.
  @Test(.enabled(if: ProcessInfo.processInfo.environment["PROMISEHTTP_STREAM_MEASURE"] == "1"))
  func measureTheMemoryOfASlowReader() async throws {
    let body = Self.pattern(64 << 20)
    try await withServer({ router in
      router.on("GET", "/big") { _ in .respond(ServerResponse(body: body)) }
    }) { server in
      let runs = [
        ("1 MiB buffer", HTTPBodyStream.defaultBufferSize),
        ("1 MiB buffer, again", HTTPBodyStream.defaultBufferSize), ("unbounded", Int.max),
      ]
      for (name, bufferSize) in runs {
        let before = Self.residentMiB()
        let start = ContinuousClock.now
        let response = try await server.client().stream(
          HTTPRequest(path: "big"), bufferSize: bufferSize, spillLimit: 1 << 30, file: #fileID, line: #line
        ).value
        let stream = response.body.lifetime.stream
        var iterator = response.body.makeAsyncIterator()
        var offset = 0
        var intact = true
        func check(_ chunk: Data) {
          intact = intact && chunk.elementsEqual(body[offset..<offset + chunk.count])
          offset += chunk.count
        }
        check(try await iterator.next() ?? Data())
        #expect(await eventually { stream.counters.received == Int64(body.count) })
        let arrived = ContinuousClock.now - start
        let paused = Self.residentMiB()
        let counters = stream.counters
        while let chunk = try await iterator.next() { check(chunk) }
        print(
          "MEASURE | \(name) | arrived in \(arrived) | RSS before \(before) MiB, all arrived \(paused) MiB,"
            + " read \(Self.residentMiB()) MiB | peak buffered in memory \(counters.peakMemory) B,"
            + " spilled \(counters.spilled) B | intact \(intact && offset == body.count)")
        #expect(intact && offset == body.count)
      }
    }
  }

  // MARK: Lines

  struct Event: Decodable, Equatable {
    let id: Int
    let text: String
  }

  @Test func ndjsonLinesDecodeAcrossChunkBoundaries() async throws {
    let events = (1...60).map { Event(id: $0, text: "é\($0) 🙂") }
    let ndjson = events.map { "{\"id\":\($0.id),\"text\":\"\($0.text)\"}" }.joined(separator: "\r\n")
    try await withServer({ router in
      router.on("GET", "/events") { _ in
        // 7-byte pieces: lines and characters cut across chunks; no newline after the last.
        .trickle(
          ServerResponse(headers: [("Content-Type", "application/x-ndjson")], body: Array(ndjson.utf8)),
          chunkSize: 7, interval: .milliseconds(1))
      }
    }) { server in
      let response = try await server.client().stream("events").value
      var decoded: [Event] = []
      for try await line in response.lines {
        decoded.append(try JSONDecoder().decode(Event.self, from: Data(line.utf8)))
      }
      #expect(decoded == events)
    }
  }

  @Test func serverSentEventsParseFromTheLines() async throws {
    let body = "retry: 10\nevent: greet\ndata: hello\r\ndata: world\n\n: keep-alive\n\ndata: second\n\n"
    try await withServer({ router in
      router.on("GET", "/sse") { _ in
        .chunked(
          ServerResponse(headers: [("Content-Type", "text/event-stream")], body: Array(body.utf8)),
          chunkSize: 5)
      }
    }) { server in
      let response = try await server.client().stream("sse", headers: ["Accept": "text/event-stream"]).value
      var events: [String] = []
      var name = "message"
      var data: [String] = []
      for try await line in response.lines {
        if line.isEmpty {
          if !data.isEmpty { events.append("\(name): \(data.joined(separator: "\n"))") }
          name = "message"
          data = []
        } else if line.hasPrefix("event: ") {
          name = String(line.dropFirst(7))
        } else if line.hasPrefix("data: ") {
          data.append(String(line.dropFirst(6)))
        }
      }
      #expect(events == ["greet: hello\nworld", "message: second"])
    }
  }

  @Test func aLineLongerThanTheLimitFailsAndCancelsTheRequest() async throws {
    try await withServer({ router in
      router.on("GET", "/long") { _ in Self.drip }
    }) { server in
      let response = try await server.client().stream("long").value
      await #expect(throws: HTTPStreamError.lineTooLong(limit: 4096)) {
        for try await _ in response.lines(maximumLength: 4096) {}
      }
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }

  // MARK: The single reader

  @Test func aSecondIteratorFailsWithAClearError() async throws {
    try await withServer({ router in
      router.on("GET", "/text") { _ in .respond(.text("one\ntwo\n")) }
    }) { server in
      let response = try await server.client().stream("text").value
      var lines: [String] = []
      for try await line in response.lines { lines.append(line) }
      #expect(lines == ["one", "two"])
      await #expect(throws: HTTPStreamError.alreadyIterated) {
        for try await _ in response.body {}
      }
      await #expect(throws: HTTPStreamError.alreadyIterated) {
        for try await _ in response.lines {}
      }
    }
  }

  @Test func twoCopiesOfAnIteratorCannotWaitAtOnce() async throws {
    try await withServer({ router in
      router.on("GET", "/drip") { _ in Self.drip }
    }) { server in
      let response = try await server.client().stream("drip").value
      var first = response.body.makeAsyncIterator()
      _ = try await first.next()
      let copy = first
      let waiting = Task {
        var iterator = copy
        return try await iterator.next()
      }
      // One of the two waits for the next chunk; the other is refused at once.
      var second = first
      let mine: Result<Data?, any Error>
      do { mine = .success(try await second.next()) } catch { mine = .failure(error) }
      let outcomes = [mine, await waiting.result]
      let refused = outcomes.filter {
        if case .failure(HTTPStreamError.alreadyIterated) = $0 { true } else { false }
      }
      let served = outcomes.filter { if case .success(.some) = $0 { true } else { false } }
      #expect(refused.count + served.count == 2)
      #expect(served.count >= 1)
      response.cancel()
    }
  }

  @Test func anInvalidRequestIsRejectedBeforeAnythingIsSent() async throws {
    try await withServer({ _ in }) { server in
      let (result, _) = await outcome(of: server.client().stream("x", headers: ["X-Bad": "a\r\nb"]))
      guard case .invalidRequest? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(server.requests.isEmpty)
    }
  }

  // MARK: Statuses and retries

  @Test func anUnacceptableStatusRejectsWithItsExcerpt() async throws {
    try await withServer({ router in
      router.on("GET", "/missing") { _ in .respond(.text("no such stream", status: 404)) }
    }) { server in
      let (result, _) = await outcome(of: server.client().stream("missing"))
      guard case .unacceptableStatus(404, _, let excerpt, _)? = httpError(result) else {
        Issue.record("got \(result)")
        return
      }
      #expect(excerpt.contains("no such stream"))
    }
  }

  @Test func retriesApplyUntilTheHead() async throws {
    let counter = Counter()
    try await withServer({ router in
      router.on("GET", "/flaky") { _ in
        counter.next() == 1 ? .respond(.text("busy", status: 503)) : .respond(.text("streamed"))
      }
    }) { server in
      let response = try await server.client(retryPolicy: quickRetries()).stream("flaky").value
      var text = ""
      for try await line in response.lines { text += line }
      #expect(text == "streamed")
      #expect(server.requests.count == 2)
    }
  }

  @Test func aCutAfterTheHeadEndsTheStreamWithoutARetry() async throws {
    try await withServer({ router in
      router.on("GET", "/cut") { _ in
        .resetMidBody(ServerResponse(body: Self.pattern(200_000)), afterBytes: 50_000)
      }
    }) { server in
      let response = try await server.client(retryPolicy: quickRetries()).stream("cut").value
      var received = 0
      do {
        for try await chunk in response.body { received += chunk.count }
        Issue.record("the stream ended without an error")
      } catch let error as HTTPError {
        guard case .transport = error else { throw error }
      }
      #expect(received <= 50_000)
      #expect(server.requests.count == 1)
    }
  }

  // MARK: Time

  @Test func theClientTimeoutStopsApplyingOnceTheHeadIsDelivered() async throws {
    let body = Self.pattern(30_000)
    try await withServer({ router in
      // About 1.5 s of body, in 30 pieces.
      router.on("GET", "/slow") { _ in
        .trickle(ServerResponse(body: body), chunkSize: 1000, interval: .milliseconds(50))
      }
    }) { server in
      let clock = VirtualTimeScheduler()
      let response = try await server.client(timeout: .seconds(5), scheduler: clock).stream("slow").value
      // Far past the client's timeout on its clock while the body is still arriving.
      clock.advance(by: .seconds(60))
      var received = Data()
      for try await chunk in response.body { received.append(chunk) }
      #expect(received == Data(body))
    }
  }

  @Test func theRequestsOwnDeadlineStillBoundsTheStream() async throws {
    try await withServer({ router in
      router.on("GET", "/drip") { _ in Self.drip }
    }) { server in
      let clock = VirtualTimeScheduler()
      let client = server.client(timeout: .seconds(5), scheduler: clock)
      let response = try await client.stream("drip", deadline: .after(.seconds(20))).value
      // Past the client's timeout (cancelled at the head) and the request's own deadline.
      clock.advance(by: .seconds(21))
      do {
        for try await _ in response.body {}
        Issue.record("the stream outlived its deadline")
      } catch HTTPError.timedOut(_, let deadline) {
        #expect(deadline == .seconds(20))
      }
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }

  @Test func aSilenceLongerThanTheTimeoutEndsTheStream() async throws {
    try await withServer({ router in
      // The head at once, then nothing for 30 s.
      router.on("GET", "/stall") { _ in
        .trickle(ServerResponse(body: Array("ab".utf8)), chunkSize: 1, interval: .seconds(30))
      }
    }) { server in
      let start = ContinuousClock.now
      // 1 s: libcurl's inactivity timer counts whole seconds, plus one (2 s here).
      let response = try await server.client(timeout: .seconds(1)).stream("stall").value
      do {
        for try await _ in response.body {}
        Issue.record("the silent stream ended without an error")
      } catch HTTPError.transport(let error, _) {
        #expect(error.code == .timedOut)
      }
      // 2 s, and load: well before the first byte's 30 s.
      #expect(ContinuousClock.now - start < .seconds(25))
    }
  }

  // MARK: Cancellation and the slot

  @Test func breakingOutCancelsTheRequestAndFreesTheSlot() async throws {
    try await withServer({ router in
      router.on("GET", "/drip") { _ in Self.drip }
      router.on("GET", "/quick") { _ in .respond(.text("quick")) }
    }) { server in
      let client = Self.oneAtATime(server)
      let start = ContinuousClock.now
      let response = try await client.stream("drip").value
      let quick = client.get("quick")
      for try await _ in response.body {
        // The slot is held while the body streams: the next request waits for it.
        #expect(server.requests.count == 1)
        break
      }
      _ = try await quick.value
      #expect(await eventually { server.server.openConnectionCount <= 1 })
      #expect(server.requests.map(\.path) == ["/drip", "/quick"])
      // Long before the drip's 60 s.
      #expect(ContinuousClock.now - start < .seconds(30))
    }
  }

  @Test func cancellingTheReadingTaskCancelsTheRequest() async throws {
    try await withServer({ router in
      router.on("GET", "/drip") { _ in Self.drip }
    }) { server in
      let response = try await Self.oneAtATime(server).stream("drip").value
      let (started, startedResolver) = Promise<Void>.pending()
      let reader = Task {
        for try await _ in response.body { startedResolver.fulfill() }
      }
      try await started.value
      reader.cancel()
      await #expect(throws: CancellationError.self) { try await reader.value }
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }

  @Test func releasingAnUnreadResponseCancelsTheRequest() async throws {
    try await withServer({ router in
      router.on("GET", "/drip") { _ in Self.drip }
      router.on("GET", "/quick") { _ in .respond(.text("quick")) }
    }) { server in
      let client = Self.oneAtATime(server)
      do {
        let response = try await client.stream("drip").value
        #expect(response.statusCode == 200)
      }
      #expect(await eventually { server.server.openConnectionCount == 0 })
      // The slot is free again.
      _ = try await client.get("quick").value
    }
  }

  @Test func cancellingThePromiseBeforeTheHeadCancelsTheRequest() async throws {
    try await withServer({ router in
      router.on("GET", "/late") { _ in .slowHeaders(.text("late"), delay: .seconds(120)) }
      router.on("GET", "/quick") { _ in .respond(.text("quick")) }
    }) { server in
      let client = Self.oneAtATime(server)
      let promise = client.stream("late")
      #expect(await server.arrived(1))
      promise.cancel()
      await #expect(throws: CancellationError.self) { try await promise.value }
      // The slot is free again (the server, asleep before its headers, cannot see the close).
      let start = ContinuousClock.now
      _ = try await client.get("quick").value
      #expect(ContinuousClock.now - start < .seconds(60), "a held slot would wait for the 120 s answer")
    }
  }
}
