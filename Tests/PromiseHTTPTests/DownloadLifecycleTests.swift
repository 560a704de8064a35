import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// How a download ends when it does not complete: a full disk, cancellation, a deadline, an
/// idle connection. None leaves a file at the destination or a temporary file beside it.
@Suite("Download lifecycle", .timeLimit(.minutes(1)))
struct DownloadLifecycleTests {
  static let content = downloadContent(1 << 20)

  /// `content` with an `ETag`, in one response.
  static let taggedFile = ServerAction.respond(ServerResponse(headers: [("ETag", "\"v1\"")], body: content))

  /// Half of `content` under a `Content-Length` of all of it twice, then nothing while the
  /// connection stays open: a download that never ends by itself.
  static let stall = ServerAction.wrongContentLength(
    ServerResponse(body: content), declared: content.count * 2)

  /// All of `content` in 48 pieces, one every 100 ms: about 4.8 s, never idle for more than 0.1 s.
  static let drip = ServerAction.trickle(
    ServerResponse(body: content), chunkSize: content.count / 48, interval: .milliseconds(100))

  /// Runs `body` with a download directory and a server that answers `GET /file` with `file`,
  /// and the other routes that `routes` registers.
  func withFileServer(
    _ file: ServerAction, routes: (Router) -> Void = { _ in },
    _ body: (DownloadDirectory, TestServer) async throws -> Void
  ) async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in file }
        routes(router)
      }) { server in
        try await body(directory, server)
      }
    }
  }

  /// A client on `queue`, so a test can wait until every delegate callback queued so far has run.
  func client(
    _ server: TestServer, queue: DispatchQueue, timeout: Duration = .seconds(30),
    retryPolicy: RetryPolicy = .none, transport: HTTPClient.Engine = .automatic
  ) -> HTTPClient {
    var configuration = HTTPClient.Configuration(
      callbackQueue: queue, retryPolicy: retryPolicy, timeout: timeout)
    configuration.engine = transport
    return HTTPClient(baseURL: server.baseURL, configuration: configuration)
  }

  @Test func aFullDiskFailsWithENOSPCAndIsNotRetried() async throws {
    try await withFileServer(Self.taggedFile) { directory, server in
      // The temporary file is /dev/full, where every write fails with ENOSPC. (A link to it
      // planted at the temporary name is no longer followed: DownloadLinkTests.)
      let temporary = DownloadFile.temporaryURL(for: directory.file())
      let client = server.client(retryPolicy: quickRetries())
      let (result, _) = await DownloadFile.$substituteTemporaryFile.withValue("/dev/full") {
        await outcome(of: client.download("file", to: directory.file()))
      }
      let error = transferError(result)
      #expect(error?.posixCode == .ENOSPC, "\(String(describing: error))")
      guard case .fileSystem("write", let url, _)? = error else {
        Issue.record("got \(String(describing: error))")
        return
      }
      #expect(url == temporary)
      #expect("\(error!)".contains("No space left on device (ENOSPC)"))
      #expect(server.requests.count == 1, "a full disk is not a reason to download again")
      #expect(directory.names.isEmpty)
    }
  }

  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func cancellingMidTransferLeavesNoFile(_ transport: HTTPClient.Engine) async throws {
    let queue = DispatchQueue(label: "DownloadLifecycleTests.cancel")
    // The download cannot end before the test cancels it.
    try await withFileServer(Self.stall) { directory, server in
      let (handler, updates) = TransferProgressHandler.makeStream(interval: .zero)
      let download = client(server, queue: queue, transport: transport).download(
        "file", to: directory.file(), progress: handler)
      for await update in updates where update.completedBytes > 0 { break }
      #expect(directory.names == [".download.bin.promisehttp-download"])
      download.cancel()
      let (result, _) = await outcome(of: download)
      #expect(throws: CancellationError.self) { try result.get() }
      // Once the server has seen the connection close, no chunk is on its way; the queue then
      // runs every callback queued before: none may bring the file back.
      #expect(await eventually { server.server.openConnectionCount == 0 })
      await offThePool { queue.sync {} }
      #expect(directory.names.isEmpty)
      expectSent(over: transport, server.requests)
    }
  }

  @Test func aChunkAfterTheEndCannotRecreateOrGrowTheFile() throws {
    let directory = try DownloadDirectory()
    defer { directory.remove() }
    let file = try DownloadFile.create(
      destination: directory.file(), requestURL: "http://example.com/file", options: DownloadOptions()
    ).get()
    let sink = DownloadSink(
      file: file, options: DownloadOptions(), reporter: nil, scheduler: PromiseSchedulers.default,
      acceptable: 200..<300, errorURL: nil, recordURL: "http://example.com/file", idleTimeout: .seconds(30))
    let head = try #require(
      HTTPURLResponse(
        url: URL(string: "http://example.com/file")!, statusCode: 200, httpVersion: "HTTP/1.1",
        headerFields: ["Content-Length": "8"]))
    guard case .consume = sink.begin(head) else { throw CancellationError() }
    #expect(sink.write(Data([1, 2, 3, 4])) == nil)
    #expect(directory.names == [".download.bin.promisehttp-download"])
    sink.abandon(undoingCompletion: false)
    #expect(directory.names.isEmpty)
    // The delegate queue may still hand over a chunk of the cancelled exchange.
    #expect(sink.write(Data([5, 6, 7, 8])) == nil)
    guard case .fail = sink.begin(head) else { throw CancellationError() }
    sink.abandon(undoingCompletion: true)
    #expect(directory.names.isEmpty)
    #expect(sink.activity(at: .zero) == .ended)
  }

  @Test func aSecondDownloadToTheSameDestinationIsRefusedWhileTheFirstRuns() async throws {
    try await withFileServer(Self.stall) { directory, server in
      let client = server.client()
      let (handler, updates) = TransferProgressHandler.makeStream(interval: .zero)
      let first = client.download("file", to: directory.file(), progress: handler)
      for await update in updates where update.completedBytes > 0 { break }
      let (second, _) = await outcome(of: client.download("file", to: directory.file()))
      let error = transferError(second)
      #expect(error?.posixCode == .EWOULDBLOCK, "\(String(describing: error))")
      #expect("\(String(describing: error))".contains("another download"))
      #expect(server.requests.count == 1)
      #expect(directory.names == [".download.bin.promisehttp-download"])
      first.cancel()
      _ = await outcome(of: first)
      #expect(directory.names.isEmpty)
    }
  }

  @Test func aStaleTemporaryFileWithoutARecordIsStartedOver() async throws {
    try await withFileServer(Self.taggedFile) { directory, server in
      // Left by a crash: longer than the body, and no record of what it holds.
      let stale = Data(downloadContent(3 << 20, seed: 3))
      try stale.write(to: DownloadFile.temporaryURL(for: directory.file()))
      _ = try await server.client().download("file", to: directory.file()).value
      #expect(directory.fingerprint() == Fingerprint(Self.content))
      #expect(server.requests.first?.header("Range") == nil)
      #expect(directory.names == ["download.bin"])
    }
  }

  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func aDeadlineMidTransferFailsAndLeavesNoFile(_ transport: HTTPClient.Engine) async throws {
    let queue = DispatchQueue(label: "DownloadLifecycleTests.deadline")
    let trickle = ServerAction.trickle(
      ServerResponse(body: Self.content), chunkSize: 16 << 10, interval: .milliseconds(30))
    try await withFileServer(trickle) { directory, server in
      let start = ContinuousClock.now
      let (result, elapsed) = await outcome(
        of: client(server, queue: queue, transport: transport).download(
          "file", to: directory.file(), deadline: .after(.seconds(1))),
        since: start)
      guard case .timedOut(_, let allowed)? = httpError(result) else {
        Issue.record("got \(String(describing: httpError(result)))")
        return
      }
      #expect(allowed == .seconds(1))
      // The deadline ended it (the allowance says so); this bounds the rest: no hang.
      #expect(elapsed < .seconds(20), "\(elapsed)")
      #expect(await eventually { server.server.openConnectionCount == 0 })
      await offThePool { queue.sync {} }
      #expect(directory.names.isEmpty)
      expectSent(over: transport, server.requests)
    }
  }

  @Test func aSlowDownloadThatKeepsReceivingOutlivesTheClientTimeout() async throws {
    let queue = DispatchQueue(label: "DownloadLifecycleTests.drip")
    // More than twice the timeout, never idle for more than a twentieth of it (a loaded machine
    // delays chunks by far less).
    try await withFileServer(
      Self.drip,
      routes: { router in
        router.on("GET", "/json") { _ in
          .trickle(.json(largeJSON(bytes: 48 * 100)), chunkSize: 100, interval: .milliseconds(100))
        }
      }
    ) { directory, server in
      let client = client(server, queue: queue, timeout: .seconds(2))
      let start = ContinuousClock.now
      let (result, elapsed) = await outcome(of: client.download("file", to: directory.file()), since: start)
      _ = try result.get()
      #expect(elapsed > .seconds(2))
      #expect(directory.fingerprint() == Fingerprint(Self.content))
      // The same drip in memory is bounded by `timeout` as a whole, as before.
      let (inMemory, _) = await outcome(of: client.get("json"))
      guard case .timedOut? = httpError(inMemory) else {
        Issue.record("got \(String(describing: httpError(inMemory)))")
        return
      }
    }
  }

  @Test func aStalledDownloadFailsAfterTheClientTimeout() async throws {
    let queue = DispatchQueue(label: "DownloadLifecycleTests.stall")
    try await withFileServer(Self.stall) { directory, server in
      let client = client(server, queue: queue, timeout: .milliseconds(300), retryPolicy: quickRetries())
      let start = ContinuousClock.now
      let (result, elapsed) = await outcome(of: client.download("file", to: directory.file()), since: start)
      guard case .timedOut(_, let allowed)? = httpError(result) else {
        Issue.record("got \(String(describing: httpError(result)))")
        return
      }
      #expect(allowed == .milliseconds(300))
      #expect(elapsed >= .milliseconds(300), "\(elapsed)")
      #expect(server.requests.count == 1)
      await offThePool { queue.sync {} }
      #expect(directory.names.isEmpty)
    }
  }

  @Test func theIdleTimeDoesNotRunWhileTheRequestWaitsForASlot() async throws {
    let queue = DispatchQueue(label: "DownloadLifecycleTests.slot")
    try await withFileServer(
      .respond(ServerResponse(body: Self.content)), routes: { $0.on("GET", "/drip") { _ in Self.drip } }
    ) { directory, server in
      let client = HTTPClient(
        baseURL: server.baseURL,
        configuration: .init(
          callbackQueue: queue, retryPolicy: .none, timeout: .seconds(2),
          maximumConcurrentRequestsPerHost: 1, maximumQueueWait: .seconds(60)))
      // The drip holds the only slot for about 4.8 s, more than twice the timeout; the second
      // download waits that long for it, unsent, and is not idle meanwhile.
      let drip = client.download("drip", to: directory.file("drip.bin"))
      let download = client.download("file", to: directory.file())
      _ = try await drip.value
      _ = try await download.value
      #expect(directory.fingerprint() == Fingerprint(Self.content))
      #expect(directory.fingerprint("drip.bin") == Fingerprint(Self.content))
    }
  }
}
