import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Uploads (`HTTPClient.upload`) of files, streams of chunks and forms to the loopback server,
/// which records each request's headers and body.
@Suite("Uploads", .timeLimit(.minutes(1)))
struct UploadTests {
  /// A temporary directory, removed by `remove()`.
  struct Scratch {
    let directory: URL

    init() throws {
      directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "UploadTests-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Writes `data` to a file named `name` and returns its URL.
    func file(_ name: String, _ data: Data) throws -> URL {
      let url = directory.appendingPathComponent(name)
      try data.write(to: url)
      return url
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
  }

  /// `count` bytes that differ from one position to the next (a shifted byte would show).
  ///
  /// Byte `i` is `i * 31 + i >> 8` (mod 256), which repeats every 64 KiB: one period is
  /// computed, then copied. Not `(0..<count).map { … }`: in a debug build under ThreadSanitizer
  /// each step of that generic loop takes a lock the sanitizer tracks, and 6 MiB took 8.7 s of
  /// a cooperative-pool thread (the tests call this from `async` code), 20 s and more with the
  /// suites running in parallel; this takes about 10 ms.
  static func pattern(_ count: Int) -> Data {
    let period = min(1 << 16, count)
    var cycle = [UInt8](repeating: 0, count: period)
    cycle.withUnsafeMutableBufferPointer { cycle in
      var index = 0
      while index < period {
        cycle[index] = UInt8(truncatingIfNeeded: index &* 31 &+ index >> 8)
        index += 1
      }
    }
    var data = Data(count: count)
    data.withUnsafeMutableBytes { bytes in
      cycle.withUnsafeBytes { cycle in
        var offset = 0
        while offset < count {
          let length = min(period, count - offset)
          bytes.baseAddress!.advanced(by: offset).copyMemory(from: cycle.baseAddress!, byteCount: length)
          offset += length
        }
      }
    }
    return data
  }

  /// An async sequence of `chunks`, one at a time.
  static func chunks(_ chunks: [Data]) -> AsyncStream<Data> {
    AsyncStream { continuation in
      for chunk in chunks { continuation.yield(chunk) }
      continuation.finish()
    }
  }

  /// The message of an `HTTPError.invalidRequest` outcome, recording an issue for any other.
  static func invalidRequest<T>(
    _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
  ) -> String? {
    if case .failure(HTTPError.invalidRequest(let message)) = result { return message }
    Issue.record("expected HTTPError.invalidRequest, got \(result)", sourceLocation: sourceLocation)
    return nil
  }

  /// Collects a progress stream's updates.
  static func updates(_ stream: AsyncStream<TransferProgress>) -> Task<[TransferProgress], Never> {
    Task {
      var all: [TransferProgress] = []
      for await update in stream { all.append(update) }
      return all
    }
  }

  @Test func aFileIsSentWholeWithItsLengthAndProgressEndsAtItsSize() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let content = Self.pattern(4 << 20)
    let url = try scratch.file("four.bin", content)
    try await withServer({ router in
      router.on("PUT", "/files/four") { request in .respond(.text("\(request.body.count)")) }
    }) { server in
      let client = server.client()
      let (progress, stream) = TransferProgressHandler.makeStream(interval: .milliseconds(1))
      let collected = Self.updates(stream)
      let response = try await client.upload(.file(url), to: "files/four", method: .put, progress: progress)
        .value
      #expect(response.statusCode == 200)
      let request = try #require(server.requests.first)
      #expect(request.header("Content-Length") == "\(content.count)")
      #expect(request.header("Transfer-Encoding") == nil)
      #expect(request.header("Content-Type") == "application/octet-stream")
      #expect(Data(request.body) == content)
      let updates = await collected.value
      let last = try #require(updates.last)
      #expect(last.isFinal)
      #expect(last.completedBytes == Int64(content.count))
      #expect(updates.allSatisfy { $0.expectedBytes == Int64(content.count) })
      #expect(zip(updates, updates.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
    }
  }

  /// Through `URLSession` the chunks are written to a file first, sent with its length; over the
  /// socket transport they are sent as they come, chunked (no length is known).
  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func aStreamOfChunksIsSentWhole(_ transport: HTTPClient.Engine) async throws {
    let pieces = (0..<64).map { Self.pattern(1000 + $0 * 97).prefix(1000 + $0 * 97) }.map { Data($0) }
    let expected = pieces.reduce(Data(), +)
    try await withServer({ router in
      router.on("POST", "/stream") { request in .respond(.text("\(request.body.count)")) }
    }) { server in
      let client = server.client(engine: transport)
      let (progress, stream) = TransferProgressHandler.makeStream(interval: .milliseconds(1))
      let collected = Self.updates(stream)
      let response = try await client.upload(.stream(Self.chunks(pieces)), to: "stream", progress: progress)
        .value
      #expect(response.statusCode == 200)
      let request = try #require(server.requests.first)
      let live = transport == .automatic && socketTransportServesLoopback
      #expect(request.header("Transfer-Encoding") == (live ? "chunked" : nil))
      #expect(request.header("Content-Length") == (live ? nil : "\(expected.count)"))
      #expect(Data(request.body) == expected)
      let last = try #require(await collected.value.last)
      #expect(last.isFinal)
      #expect(last.completedBytes == Int64(expected.count))
      #expect(last.expectedBytes == (live ? nil : Int64(expected.count)))
      expectSent(over: transport, server.requests)
    }
  }

  @Test func overASocketAStreamWithALengthIsSentWithIt() async throws {
    let pieces = (0..<8).map { Self.pattern(5000 + $0) }
    let expected = pieces.reduce(Data(), +)
    try await withServer({ router in
      router.on("POST", "/stream") { request in .respond(.text("\(request.body.count)")) }
    }) { server in
      let response = try await server.client(engine: .automatic).upload(
        .stream(Self.chunks(pieces), length: Int64(expected.count)), to: "stream"
      ).value
      #expect(response.statusCode == 200)
      let request = try #require(server.requests.first)
      #expect(request.header("Transfer-Encoding") == nil)
      #expect(request.header("Content-Length") == "\(expected.count)")
      #expect(Data(request.body) == expected)
      expectSent(over: .automatic, server.requests)
    }
  }

  @Test func overASocketTheFirstChunkIsSentBeforeTheSequenceEnds() async throws {
    // The sequence yields one chunk, then waits until the server has received it: through a
    // spooled file this would never end.
    let first = Self.pattern(10_000)
    let connected = LockedBox(false)
    try await withServer({ router in
      router.on("POST", "/stream") { request in .respond(.text("\(request.body.count)")) }
    }) { server in
      let chunks = AsyncStream<Data> { continuation in
        continuation.yield(first)
        Task {
          // A spooled upload connects only once the sequence has ended: a connection open now
          // carries the first chunk. Bounded, so the old behaviour fails instead of hanging.
          let limit = ContinuousClock.now + .seconds(30)
          while server.server.openConnectionCount == 0, ContinuousClock.now < limit {
            try? await Task.sleep(for: .milliseconds(5))
          }
          connected.withLock { $0 = server.server.openConnectionCount > 0 }
          continuation.yield(Data("end".utf8))
          continuation.finish()
        }
      }
      let response = try await server.client(engine: .automatic).upload(.stream(chunks), to: "stream").value
      #expect(response.statusCode == 200)
      #expect(connected.load())
      #expect(Data(try #require(server.requests.first).body) == first + Data("end".utf8))
    }
  }

  @Test func bytesReportProgressOnTheQueueTheCallerNames() async throws {
    let content = Self.pattern(1 << 20)
    let queue = DispatchQueue(label: "UploadTests.progress")
    let seen = LockedUpdates()
    try await withServer({ router in
      router.on("POST", "/bytes") { request in .respond(.text("\(request.body.count)")) }
    }) { server in
      let progress = TransferProgressHandler(on: queue, interval: .milliseconds(1)) { update in
        dispatchPrecondition(condition: .onQueue(queue))
        seen.append(update)
      }
      _ = try await server.client().upload(.data(content), to: "bytes", progress: progress).value
      #expect(Data(try #require(server.requests.first).body) == content)
      #expect(server.requests.first?.header("Content-Length") == "\(content.count)")
    }
    // The final update was handed to the queue before the promise settled.
    queue.sync {}
    let updates = seen.all
    #expect(
      updates.last
        == TransferProgress(
          completedBytes: Int64(content.count), expectedBytes: Int64(content.count), isFinal: true))
    #expect(updates.filter(\.isFinal).count == 1)
  }

  /// Updates appended from a queue, read by the test.
  final class LockedUpdates: @unchecked Sendable {
    // Safety: `updates` is read and written only while `lock` is held.
    private let lock = NSLock()
    private var updates: [TransferProgress] = []

    func append(_ update: TransferProgress) {
      lock.lock()
      updates.append(update)
      lock.unlock()
    }

    var all: [TransferProgress] {
      lock.lock()
      defer { lock.unlock() }
      return updates
    }
  }

  @Test func theLengthOfABodyIsKnownBeforeItIsSent() throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let url = try scratch.file("sized.bin", Self.pattern(1234))
    #expect(HTTPBody.data(Data(count: 7)).length == 7)
    #expect(HTTPBody.file(url).length == 1234)
    #expect(HTTPBody.file(scratch.directory.appendingPathComponent("none")).length == nil)
    #expect(HTTPBody.stream(Self.chunks([])).length == nil)
    #expect(HTTPBody.stream(Self.chunks([]), length: 10).length == 10)
  }

  @Test func aStreamWithALengthThatItDoesNotMatchIsRejected() async throws {
    try await withServer({ router in
      router.on("POST", "/stream") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client()
      let short = await outcome(
        of: client.upload(.stream(Self.chunks([Data("abc".utf8)]), length: 10), to: "stream"))
      guard let message = Self.invalidRequest(short.result) else { return }
      #expect(message.contains("yielded 3 bytes, not the 10"))
    }
  }

  struct Broken: Error, CustomStringConvertible {
    var description: String { "the microphone was unplugged" }
  }

  @Test func aSequenceThatThrowsRejectsWithItsError() async throws {
    try await withServer({ router in
      router.on("POST", "/stream") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client()
      let (chunks, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
      continuation.yield(Data(repeating: 1, count: 1000))
      continuation.finish(throwing: Broken())
      let result = await outcome(of: client.upload(.stream(chunks), to: "stream")).result
      guard let message = Self.invalidRequest(result) else { return }
      #expect(message.contains("the microphone was unplugged"))
    }
  }

  @Test func aFileThatCannotBeReadIsRefusedBeforeAnythingIsSent() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let missing = scratch.directory.appendingPathComponent("missing.bin")
    try await withServer({ router in
      router.on("POST", "/files") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client()
      for (url, reason) in [(missing, "No such file"), (scratch.directory, "directory")] {
        // Without the check, FoundationNetworking sent the headers and waited for the client's
        // timeout (measured: 30 s) before failing.
        let result = await outcome(of: client.upload(.file(url), to: "files")).result
        guard case .invalidRequest(let message)? = httpError(result) else {
          Issue.record("expected invalidRequest for \(url.path), got \(result)")
          continue
        }
        #expect(message.contains(url.path))
        #expect(message.contains(reason))
        var form = MultipartForm()
        form.append("x", name: "field")
        form.append(fileAt: url, name: "file")
        let formResult = await outcome(of: client.upload(.multipart(form), to: "files")).result
        guard case .invalidRequest(let formMessage)? = httpError(formResult) else {
          Issue.record("expected invalidRequest for the form with \(url.path), got \(formResult)")
          continue
        }
        #expect(formMessage.contains(url.path))
      }
      #expect(server.requests.isEmpty)
    }
  }

  @Test(.enabled("root reads any file") { getuid() != 0 })
  func aFileWithoutReadPermissionIsRefused() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let url = try scratch.file("secret.bin", Data("x".utf8))
    chmod(url.path, 0)
    try await withServer({ _ in }) { server in
      let result = await outcome(of: server.client().upload(.file(url), to: "files")).result
      guard let message = Self.invalidRequest(result) else { return }
      #expect(message.contains("Permission denied"))
    }
  }

  @Test func aRetriedFileUploadSendsTheWholeFileAgain() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let content = Self.pattern(300_000)
    let url = try scratch.file("retried.bin", content)
    let calls = Counter()
    try await withServer({ router in
      router.on("PUT", "/files/retried") { _ in calls.next() == 1 ? .closeImmediately : .respond(.text("ok"))
      }
    }) { server in
      let client = server.client(retryPolicy: quickRetries())
      let response = try await client.upload(.file(url), to: "files/retried", method: .put).value
      #expect(response.statusCode == 200)
      #expect(server.requests.count == 2)
      for request in server.requests { #expect(Data(request.body) == content) }
    }
  }

  @Test func aRetriedFormWithAFileSendsTheWholeFormAgain() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let url = try scratch.file("retried.bin", Self.pattern(200_000))
    var form = MultipartForm()
    form.append("a value", name: "field")
    form.append(fileAt: url, name: "file")
    let expected = try MultipartFormTests.encoded(form, in: scratch)
    let calls = Counter()
    try await withServer({ router in
      router.on("POST", "/forms") { _ in calls.next() == 1 ? .closeImmediately : .respond(.text("ok")) }
    }) { server in
      let client = server.client(
        retryPolicy: RetryPolicy(
          maximumAttempts: 3, retryableMethods: [.post],
          backoff: .exponential(initial: .milliseconds(5), maximum: .milliseconds(20))))
      let (progress, stream) = TransferProgressHandler.makeStream(interval: .milliseconds(1))
      let collected = Self.updates(stream)
      _ = try await client.upload(.multipart(form), to: "forms", progress: progress).value
      #expect(server.requests.count == 2)
      // Counted again from 0 by the second attempt; the last update is the whole form.
      let last = try #require(await collected.value.last)
      #expect(
        last
          == TransferProgress(
            completedBytes: Int64(expected.count), expectedBytes: Int64(expected.count), isFinal: true))
      for request in server.requests {
        #expect(Data(request.body) == expected)
        #expect(request.header("Content-Type") == form.contentType)
      }
    }
  }

  @Test func overASocketAStreamIsReadOnceAndNotRetried() async throws {
    let pieces = (0..<10).map { Self.pattern(10_000 + $0) }
    let calls = Counter()
    try await withServer({ router in
      router.on("PUT", "/stream") { _ in calls.next() == 1 ? .closeImmediately : .respond(.text("ok")) }
      router.on("PUT", "/moved") { _ in .respond(.redirect(to: "/stream", status: 307)) }
    }) { server in
      let client = server.client(retryPolicy: quickRetries(), engine: .automatic)
      let (result, _) = await outcome(
        of: client.upload(.stream(Self.chunks(pieces)), to: "stream", method: .put))
      guard case .transport(let error, _)? = httpError(result) else {
        Issue.record("got \(String(describing: httpError(result)))")
        return
      }
      #expect(error.code == .networkConnectionLost)
      #expect(server.requests.count == 1)
      // A 307 would send the body again: refused with the reason, nothing sent twice.
      let redirected = await outcome(
        of: client.upload(.stream(Self.chunks(pieces)), to: "moved", method: .put))
      guard let message = Self.invalidRequest(redirected.result) else { return }
      #expect(message.contains("a sequence is read once"))
      #expect(server.requests.count == 2)
      expectSent(over: .automatic, server.requests)
    }
  }

  @Test func aRetriedStreamUploadSendsTheSameBytesAgainThroughTheSession() async throws {
    let pieces = (0..<10).map { Self.pattern(10_000 + $0) }
    let calls = Counter()
    try await withServer({ router in
      router.on("PUT", "/stream") { _ in calls.next() == 1 ? .closeImmediately : .respond(.text("ok")) }
    }) { server in
      let client = server.client(retryPolicy: quickRetries(), engine: .urlSession)
      _ = try await client.upload(.stream(Self.chunks(pieces)), to: "stream", method: .put).value
      #expect(server.requests.count == 2)
      for request in server.requests { #expect(Data(request.body) == pieces.reduce(Data(), +)) }
    }
  }

  /// A server may answer before it has read the body (a 413) and close: the answer is what the
  /// upload gets, not the broken connection, over either transport.
  ///
  /// Over `URLSession`, libcurl sometimes writes into the closed connection before it reads
  /// the answer and reports "Send failure: Broken pipe" instead (seen once in CI, on a loaded
  /// machine): recorded there as an intermittent known issue, not hidden. The socket transport
  /// reads the answer first whatever the timing.
  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func anAnswerBeforeTheBodyIsDelivered(_ transport: HTTPClient.Engine) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let url = try scratch.file("big.bin", Self.pattern(8 << 20))
    try await withServer({ router in
      router.on(
        "PUT", "/upload", body: { _ in .respondBeforeBody(.respond(.text("too large", status: 413))) }
      ) {
        _ in .respond(.text("read"))
      }
    }) { server in
      let client = server.client(engine: transport)
      let (result, _) = await outcome(of: client.upload(.file(url), to: "upload", method: .put))
      guard case .unacceptableStatus(let status, _, let excerpt, _)? = httpError(result) else {
        if transport == .urlSession, case .transport(let error, _)? = httpError(result),
          error.localizedDescription.contains("Send failure")
        {
          withKnownIssue(
            "libcurl wrote into the closed connection before reading the answer", isIntermittent: true
          ) {
            Issue.record("got \(String(describing: httpError(result)))")
          }
        } else {
          Issue.record("got \(String(describing: httpError(result)))")
        }
        return
      }
      #expect(status == 413)
      #expect(excerpt == "too large")
      expectSent(over: transport, server.requests)
    }
  }

  /// The message of a transport error's `URLError`, recording an issue for any other outcome.
  static func transportFailure<T>(
    _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
  ) -> (code: URLError.Code, message: String)? {
    guard case .failure(HTTPError.transport(let error, _)) = result else {
      Issue.record("expected HTTPError.transport, got \(result)", sourceLocation: sourceLocation)
      return nil
    }
    return (error.code, error.failureMessage ?? "")
  }

  /// A server that reads the head of an upload (and part of its body, or none) and shuts its
  /// sending side down without answering has sent no reply at all: the upload fails as a GET to
  /// it does, "Empty reply from server", however far the body got (it used to read "The server
  /// answered before the whole body was sent" when the end of the stream was seen while the
  /// body was still being sent, in 5 of 8 runs). Each server closes in its own way: the loopback
  /// server's lingering close (FIN, then what arrives for 0.2 s is read, then a reset), and a
  /// raw one that closes at once after its FIN (a reset, the body unread) or reads the body to
  /// its end. (Over `.urlSession`, measured: libcurl reports "Send failure: Broken pipe", code
  /// `.unknown`, for the first two, and "Empty reply from server", `.badServerResponse`, for the
  /// third, as for a GET; not asserted, it is FoundationNetworking's.)
  @Test(arguments: [HalfClosingServer.Ending.lingering, .closeAtOnce, .readToTheEnd])
  func anUploadTheServerHalfClosesWithoutAnsweringIsAnEmptyReply(_ ending: HalfClosingServer.Ending)
    async throws
  {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let url = try scratch.file("big.bin", Self.pattern(8 << 20))
    let raw = ending == .lingering ? nil : try HalfClosingServer(bodyBytes: 64 << 10, ending: ending)
    defer { raw?.stop() }
    try await withServer({ router in
      router.on("PUT", "/upload", body: { _ in .respondBeforeBody(.closeImmediately) }) { _ in
        .respond(.text("read"))
      }
    }) { server in
      let client =
        raw.map { HTTPClient(baseURL: $0.baseURL, configuration: .init(retryPolicy: .none)) }
        ?? server.client(engine: .automatic)
      var outcomes: [String: Int] = [:]
      for _ in 0..<20 {
        let (result, _) = await outcome(of: client.upload(.file(url), to: "upload", method: .put))
        guard let (code, message) = Self.transportFailure(result) else { continue }
        outcomes["\(code.rawValue) \(message)", default: 0] += 1
      }
      print("HALF-CLOSE | \(ending) | \(outcomes)")
      #expect(outcomes == ["\(URLError.Code.networkConnectionLost.rawValue) Empty reply from server": 20])
      #expect(raw.map { $0.connections == 20 } ?? (server.requests.count == 20))
    }
  }

  /// A 303 turns an upload into a GET without a body, over either transport, for a file and
  /// (over a socket, where it is read once) a stream of chunks alike.
  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func aSeeOtherAfterAnUploadIsFollowedWithoutTheBody(_ transport: HTTPClient.Engine) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let url = try scratch.file("form.bin", Self.pattern(100_000))
    try await withServer({ router in
      router.on("POST", "/from") { _ in .respond(.redirect(to: "/to", status: 303)) }
      router.on("GET", "/to") { request in .respond(.text("got \(request.body.count)")) }
    }) { server in
      let client = server.client(engine: transport)
      let file = try await client.upload(.file(url), to: "from").value
      #expect(file.text == "got 0")
      let pieces = (0..<4).map { Self.pattern(10_000 + $0) }
      let stream = try await client.upload(.stream(Self.chunks(pieces)), to: "from").value
      #expect(stream.text == "got 0")
      let hops = server.requests.filter { $0.path == "/to" }
      #expect(hops.count == 2)
      for hop in hops {
        #expect(hop.method == "GET")
        #expect(hop.header("Content-Length") == nil)
        #expect(hop.header("Transfer-Encoding") == nil)
      }
      expectSent(over: transport, server.requests)
    }
  }

  /// A `100 Continue` (asked for, or not) while the body is being sent is skipped: the upload
  /// goes on and gets the final answer.
  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func anInterimAnswerDuringTheBodyDoesNotStopIt(_ transport: HTTPClient.Engine) async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let content = Self.pattern(8 << 20)
    let url = try scratch.file("big.bin", content)
    try await withServer({ router in
      router.on("PUT", "/up", body: { _ in .throttle(chunkSize: 256 << 10, pause: .milliseconds(20)) }) {
        request in .respond(.text("\(request.consumedBody?.byteCount ?? -1)"))
      }
    }) { server in
      let client = server.client(timeout: .seconds(30), engine: transport)
      let response = try await client.upload(
        .file(url), to: "up", method: .put, headers: ["Expect": "100-continue"]
      ).value
      #expect(response.text == "\(content.count)")
      expectSent(over: transport, server.requests)
    }
  }

  @Test func overASocketTheTransportOwnsTheFramingFields() async throws {
    let pieces = (0..<4).map { Self.pattern(10 + $0) }
    try await withServer({ router in
      router.on("POST", "/up") { request in .respond(.text("\(request.body.count)")) }
    }) { server in
      // A Content-Length of the caller's beside a body sent chunked would be both: refused (400).
      let response = try await server.client(engine: .automatic).upload(
        .stream(Self.chunks(pieces)), to: "up",
        headers: ["Content-Length": "46", "Transfer-Encoding": "gzip"]
      ).value
      #expect(response.text == "46")
      let request = try #require(server.requests.first)
      #expect(request.header("Content-Length") == nil)
      #expect(request.header("Transfer-Encoding") == "chunked")
      expectSent(over: .automatic, server.requests)
    }
  }

  @Test func aRedirectThatRepeatsTheBodySendsTheFileAgain() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let content = Self.pattern(100_000)
    let url = try scratch.file("moved.bin", content)
    try await withServer({ router in
      router.on("PUT", "/old") { _ in .respond(.redirect(to: "/new", status: 307)) }
      router.on("PUT", "/new") { request in .respond(.text("\(request.body.count)")) }
    }) { server in
      let response = try await server.client().upload(.file(url), to: "old", method: .put).value
      #expect(response.statusCode == 200)
      let hop = try #require(server.requests.last)
      #expect(hop.path == "/new")
      #expect(hop.header("Content-Length") == "\(content.count)")
      #expect(Data(hop.body) == content)
    }
  }

  @Test func cancellingAnUploadWhoseStreamWaitsForItsNextChunkStopsTheStream() async throws {
    try await withServer({ router in
      router.on("POST", "/stream") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client()
      // One chunk, then nothing.
      let (chunks, continuation) = AsyncStream<Data>.makeStream()
      let stopped = AsyncStream<Void>.makeStream()
      continuation.onTermination = { _ in stopped.continuation.finish() }
      continuation.yield(Data(repeating: 1, count: 10))
      let promise = client.upload(.stream(chunks), to: "stream")
      try await Task.sleep(for: .milliseconds(50))
      promise.cancel()
      let result = await outcome(of: promise)
      #expect(throws: CancellationError.self) { try result.result.get() }
      #expect(result.elapsed < .seconds(30), "the sequence never ends: only the fix ends the request")
      // The sequence was stopped, and nothing was sent.
      for await _ in stopped.stream {}
      #expect(server.requests.isEmpty)
      #expect(try await client.post("stream").value.statusCode == 200)
    }
  }

  @Test func cancellingAStreamUploadThatWaitsForItsTurnEndsTheSequence() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(30)) }
      router.on("POST", "/stream") { _ in .respond(.text("ok")) }
    }) { server in
      // One request at a time, and the slot is taken: the upload never starts.
      let client = HTTPClient(
        baseURL: server.baseURL,
        configuration: .init(retryPolicy: .none, maximumConcurrentRequestsPerHost: 1))
      let slow = client.get("slow")
      #expect(await eventually { server.requests.count == 1 })
      let (chunks, continuation) = AsyncStream<Data>.makeStream()
      let stopped = AsyncStream<Void>.makeStream()
      continuation.onTermination = { _ in stopped.continuation.finish() }
      // Chunks the sequence holds already: it learns of the end only once asked past them.
      for _ in 0..<3 { continuation.yield(Data(repeating: 1, count: 10)) }
      let upload = client.upload(.stream(chunks), to: "stream")
      upload.cancel()
      let result = await outcome(of: upload)
      #expect(throws: CancellationError.self) { try result.result.get() }
      for await _ in stopped.stream {}
      #expect(server.requests.count == 1)
      slow.cancel()
    }
  }

  @Test func theRequestsDeadlineEndsAStreamThatDoesNotEnd() async throws {
    try await withServer({ router in
      router.on("POST", "/stream") { _ in .respond(.text("ok")) }
    }) { server in
      let (chunks, continuation) = AsyncStream<Data>.makeStream()
      let stopped = AsyncStream<Void>.makeStream()
      continuation.onTermination = { _ in stopped.continuation.finish() }
      continuation.yield(Data(repeating: 1, count: 10))
      let request = HTTPRequest(method: .post, path: "stream", deadline: .after(.milliseconds(200)))
      let result = await outcome(of: server.client().upload(.stream(chunks), with: request))
      guard case .timedOut(_, let allowed)? = httpError(result.result) else {
        Issue.record("expected timedOut, got \(result.result)")
        return
      }
      #expect(allowed == .milliseconds(200))
      #expect(result.elapsed < .seconds(30), "the sequence never ends: only the fix ends the request")
      for await _ in stopped.stream {}
      #expect(server.requests.isEmpty)
    }
  }

  @Test func aStreamToAPathThatCannotBeSentIsNotRead() async throws {
    try await withServer({ _ in }) { server in
      let read = Counter()
      let chunks = AsyncStream<Data>(unfolding: {
        _ = read.next()
        return nil
      })
      let result = await outcome(of: server.client().upload(.stream(chunks), to: "a/../b")).result
      _ = Self.invalidRequest(result)
      #expect(read.value == 0)
    }
  }

  @Test func anUploadWithABodyOfItsOwnOrAGetIsRefused() async throws {
    try await withServer({ _ in }) { server in
      let client = server.client()
      let own = await outcome(
        of: client.upload(
          .data(Data("a".utf8)), with: HTTPRequest(method: .post, path: "x", body: Data("b".utf8))))
      _ = Self.invalidRequest(own.result)
      let get = await outcome(of: client.upload(.data(Data("a".utf8)), to: "x", method: .get))
      _ = Self.invalidRequest(get.result)
      #expect(server.requests.isEmpty)
    }
  }

  @Test func aFormWhoseFileHoldsTheBoundaryFailsClearly() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    var form = MultipartForm(boundary: "fixed-boundary")
    let url = try scratch.file(
      "evil.bin", Self.pattern(100_000) + Data("\r\n--fixed-boundary--\r\n".utf8) + Self.pattern(10))
    form.append(fileAt: url, name: "file")
    try await withServer({ router in
      router.on("POST", "/forms") { _ in .respond(.text("ok")) }
    }) { server in
      let (progress, stream) = TransferProgressHandler.makeStream(interval: .milliseconds(1))
      let collected = Self.updates(stream)
      let result = await outcome(
        of: server.client().upload(.multipart(form), to: "forms", progress: progress)
      )
      .result
      // A failed upload ends its progress without a final update.
      #expect(await collected.value.allSatisfy { !$0.isFinal })
      guard let message = Self.invalidRequest(result) else { return }
      #expect(message.contains("contains the form's boundary"))
      #expect(message.contains(url.path))
    }
  }

  @Test func aFileThatShrinksWhileBeingSentFailsClearly() async throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    let url = try scratch.file("shrinking.bin", Self.pattern(100_000))
    var form = MultipartForm()
    form.append(fileAt: url, name: "file")
    let plan = try form.plan().get()
    // The form was measured at 100 000 bytes; the file now has 10.
    try Self.pattern(10).write(to: url)
    let stream = MultipartBodyStream(plan.segments, boundary: form.boundary)
    let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1 << 16)
    defer { buffer.deallocate() }
    var result = 1
    while result > 0 { result = stream.read(buffer, maxLength: 1 << 16) }
    #expect(result == -1)
    #expect(stream.failure?.description.contains("shrank while it was being sent") == true)
  }

  /// Measures the growth of the resident set while a 256 MiB file is uploaded to the server at
  /// `PROMISEHTTP_UPLOAD_RSS_URL` (one that discards the body); not run otherwise.
  @Test(.enabled(if: ProcessInfo.processInfo.environment["PROMISEHTTP_UPLOAD_RSS_URL"] != nil))
  func residentMemoryStaysFlatUploadingALargeFile() async throws {
    let target = try #require(
      ProcessInfo.processInfo.environment["PROMISEHTTP_UPLOAD_RSS_URL"].flatMap(URL.init))
    let scratch = try Scratch()
    defer { scratch.remove() }
    let url = scratch.directory.appendingPathComponent("large.bin")
    _ = FileManager.default.createFile(atPath: url.path, contents: nil)
    let handle = try FileHandle(forWritingTo: url)
    let block = Self.pattern(1 << 20)
    for _ in 0..<256 { try handle.write(contentsOf: block) }
    try handle.close()
    _ = loopbackBypassesProxy
    let client = HTTPClient(baseURL: target)
    func residentBytes() -> Int {
      let fields = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8))?.split(separator: " ")
      return (fields.flatMap { Int($0[1]) } ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
    var form = MultipartForm()
    form.append("large", name: "name")
    form.append(fileAt: url, name: "file")
    let kinds: [(String, HTTPBody)] = [
      ("file", .file(url)), ("form with the file", .multipart(form)), ("file, again", .file(url)),
      (
        "stream of 64 KiB chunks",
        .stream(
          AsyncStream<Data> { continuation in
            for _ in 0..<(256 * 16) { continuation.yield(block.prefix(65536)) }
            continuation.finish()
          })
      ),
    ]
    for (name, body) in kinds {
      let before = residentBytes()
      let start = ContinuousClock.now
      _ = try await client.upload(body, to: "sink").value
      print(
        "RSS | \(name) | 256 MiB | +\((residentBytes() - before) >> 20) MiB | \(ContinuousClock.now - start)")
    }
  }
}

/// A server on 127.0.0.1 that reads the head of each request and `bodyBytes` of its body, then
/// shuts its sending side down (FIN) without answering, and ends as `ending` says.
final class HalfClosingServer: Sendable {
  enum Ending: CustomStringConvertible {
    /// The loopback server's own (`.respondBeforeBody(.closeImmediately)`), not this one's.
    case lingering
    /// Closes right after the FIN: the unread body makes the close a reset.
    case closeAtOnce
    /// Reads until the client closes.
    case readToTheEnd

    var description: String {
      switch self {
      case .lingering: "lingering close"
      case .closeAtOnce: "FIN, then a reset"
      case .readToTheEnd: "FIN, the body read to its end"
      }
    }
  }

  let port: Int
  private let listener: Int32
  private let served = DispatchSemaphore(value: 0)
  private let accepted = LockedCount()

  var baseURL: URL { URL(string: "http://127.0.0.1:\(port)/")! }
  /// The connections accepted so far.
  var connections: Int { accepted.value }

  init(bodyBytes: Int, ending: Ending) throws {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
      }
    }
    guard bound else {
      close(fd)
      throw POSIXError(.EADDRNOTAVAIL)
    }
    listener = fd
    port = Int(UInt16(bigEndian: address.sin_port))
    let (served, accepted) = (served, accepted)
    Thread {
      while true {
        let connection = accept(fd, nil, nil)
        if connection < 0, errno == EINTR { continue }
        guard connection >= 0 else { break }
        accepted.increment()
        Self.serve(connection, bodyBytes: bodyBytes, ending: ending)
      }
      served.signal()
    }.start()
  }

  /// Reads the head and `bodyBytes` more, shuts the sending side down, then ends as `ending` says.
  private static func serve(_ fd: Int32, bodyBytes: Int, ending: Ending) {
    defer { close(fd) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16 << 10)
    var bodyStart: Int?
    while bodyStart.map({ received.count - $0 < bodyBytes }) ?? true {
      let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      guard count > 0 else { return }
      received += buffer[..<count]
      if bodyStart == nil, let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
        bodyStart = end.upperBound
      }
    }
    shutdown(fd, Int32(SHUT_WR))
    guard ending == .readToTheEnd else { return }
    while buffer.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, 0) }) > 0 {}
  }

  /// Stops accepting, and waits for the connection being served.
  func stop() {
    shutdown(listener, Int32(SHUT_RDWR))
    served.wait()
    close(listener)
  }
}

/// A count shared between threads.
private final class LockedCount: @unchecked Sendable {
  // Safety: `count` is read and written only while `lock` is held.
  private let lock = NSLock()
  private var count = 0

  func increment() {
    lock.lock()
    count += 1
    lock.unlock()
  }

  var value: Int {
    lock.lock()
    defer { lock.unlock() }
    return count
  }
}
