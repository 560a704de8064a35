import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("RequestQueue", .timeLimit(.minutes(1)))
struct RequestQueueTests {
  /// A server that answers `/slow` after 300 ms, `/hold` after 20 s (cut short by `stop()`),
  /// and every other path it is given at once.
  static func routes(_ paths: [String] = []) -> (Router) -> Void {
    { router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("slow"), delay: .milliseconds(300)) }
      router.on("GET", "/hold") { _ in .slowHeaders(.text("held"), delay: .seconds(20)) }
      for path in paths {
        router.on("GET", path) { _ in .respond(.text(path)) }
      }
    }
  }

  /// Returns a client of `server` without retries, with the queue settings given.
  static func client(
    _ server: TestServer, timeout: Duration = .seconds(30), limit: Int? = nil,
    maximumQueueWait: Duration = HTTPClient.defaultMaximumQueueWait,
    scheduler: any PromiseScheduler = PromiseSchedulers.default
  ) -> HTTPClient {
    HTTPClient(
      baseURL: server.baseURL,
      configuration: .init(
        retryPolicy: .none, timeout: timeout, maximumConcurrentRequestsPerHost: limit,
        maximumQueueWait: maximumQueueWait, scheduler: scheduler))
  }

  /// Awaits every promise and returns the descriptions of the failures.
  static func failures(of promises: [Promise<HTTPResponse>]) async -> [String] {
    var failures: [String] = []
    for promise in promises {
      let (result, _) = await outcome(of: promise)
      if case .failure(let error) = result { failures.append("\(error)") }
    }
    return failures
  }

  // MARK: Over loopback sockets

  @Test func requestsWaitingForAConnectionDoNotUseUpTheirTimeout() async throws {
    try await withServer(Self.routes()) { server in
      // One place, a 20 s timeout, on a clock the test moves: the waiting request's deadline
      // starts when it leaves the queue (at 19 s), so it passes at 39 s, not at 20 s.
      let clock = VirtualTimeScheduler()
      let client = Self.client(server, timeout: .seconds(20), limit: 1, scheduler: clock)
      let first = client.get("hold")
      let waiting = client.get("hold")
      #expect(await server.arrived(1))
      clock.advance(by: .seconds(19))
      first.cancel()
      #expect(await server.arrived(2))
      clock.advance(to: .milliseconds(38_999))
      #expect(waiting.isPending)
      clock.advance(to: .seconds(39))
      let (result, _) = await outcome(of: waiting)
      guard case .timedOut(_, let allowed)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(allowed == .seconds(20))
    }
  }

  @Test func theSessionsConnectionsPerHostAreTheDefaultLimitAndKeepRequestsOutOfLibcurl() async throws {
    try await withServer(Self.routes()) { server in
      // 2 connections per host: 8 requests of 300 ms. The timeouts are on a clock that does
      // not move, so none can end a request: what is tested is the queue, not the load.
      let configuration = HTTPClient.makeDefaultConfiguration()
      configuration.httpMaximumConnectionsPerHost = 2
      let clock = VirtualTimeScheduler()
      let client = HTTPClient(
        baseURL: server.baseURL,
        configuration: .init(
          sessionConfiguration: configuration, retryPolicy: .none, timeout: .seconds(30), scheduler: clock))
      #expect(client.maximumConcurrentRequestsPerHost == 2)
      let requests = (0..<8).map { _ in client.get("slow") }
      // 2 deadline timers for the 2 requests sent, 6 queue-wait timers: no deadline runs in the queue.
      #expect(clock.pendingCount == 8)
      let failures = await Self.failures(of: requests)
      #expect(failures.isEmpty, "\(failures.count) of 8 failed: \(failures.first ?? "")")
      #expect(server.requests.count == 8)
      #expect(server.server.maximumConcurrentRequests == 2)
      #expect(clock.pendingCount == 0)
    }
  }

  @Test func theServerNeverSeesMoreRequestsAtOnceThanTheLimit() async throws {
    try await withServer(Self.routes()) { server in
      let client = Self.client(server, limit: 2)
      #expect(client.maximumConcurrentRequestsPerHost == 2)
      let failures = await Self.failures(of: (0..<10).map { _ in client.get("slow") })
      #expect(failures.isEmpty, "\(failures.count) of 10 failed: \(failures.first ?? "")")
      #expect(server.server.maximumConcurrentRequests == 2)
    }
  }

  @Test func theDefaultLimitIsTheSessionsConnectionsPerHost() {
    let base = URL(string: "http://127.0.0.1:9/")!
    let expected = HTTPClient.makeDefaultConfiguration().httpMaximumConnectionsPerHost
    #expect(HTTPClient(baseURL: base).maximumConcurrentRequestsPerHost == expected)
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = 3
    #expect(
      HTTPClient(baseURL: base, configuration: .init(sessionConfiguration: configuration))
        .maximumConcurrentRequestsPerHost == 3)
    #expect(
      HTTPClient(baseURL: base, configuration: .init(maximumConcurrentRequestsPerHost: 0))
        .maximumConcurrentRequestsPerHost == 1)
    #expect(HTTPClient(baseURL: base).maximumQueueWait == HTTPClient.defaultMaximumQueueWait)
  }

  @Test func aLimitAboveTheSessionsConnectionsRaisesThem() async throws {
    try await withServer(Self.routes()) { server in
      // 4 requests at once on a session configured for 2 connections: had the session kept 2,
      // the server would see 2 at a time, the others waiting inside libcurl.
      let configuration = HTTPClient.makeDefaultConfiguration()
      configuration.httpMaximumConnectionsPerHost = 2
      let client = HTTPClient(
        baseURL: server.baseURL,
        configuration: .init(
          sessionConfiguration: configuration, retryPolicy: .none, timeout: .seconds(30),
          maximumConcurrentRequestsPerHost: 4))
      // Held requests: all 4 must be at the server at once, however slowly they get there.
      let held = (0..<4).map { _ in client.get("hold") }
      #expect(await server.arrived(4))
      #expect(server.server.maximumConcurrentRequests == 4)
      for request in held { request.cancel() }
    }
  }

  @Test func aRequestThatWaitsTooLongFailsUnsent() async throws {
    try await withServer(Self.routes(["/never", "/after"])) { server in
      let client = Self.client(server, limit: 1, maximumQueueWait: .milliseconds(200))
      let held = client.get("hold")
      let (result, elapsed) = await outcome(of: client.get("never"))
      guard case .queueWaitExceeded(let limit, let url)? = httpError(result) else {
        Issue.record("expected queueWaitExceeded, got \(result)")
        return
      }
      #expect(limit == .milliseconds(200))
      #expect(url?.path == "/never")
      #expect(elapsed >= .milliseconds(190))
      let description = "\(try #require(httpError(result)))"
      #expect(description.contains("never sent"))
      #expect(description.contains("for a connection to 127.0.0.1:\(server.server.port)"))
      // Once the slot is free, the next request goes out; the expired one never does.
      #expect(await server.arrived(1))
      held.cancel()
      _ = try await client.get("after").value
      #expect(server.requests.map(\.path) == ["/hold", "/after"])
    }
  }

  @Test func aChainDeadlinePassingInTheQueueTimesOutUnsent() async throws {
    try await withServer(Self.routes(["/never", "/after"])) { server in
      let clock = VirtualTimeScheduler()
      let client = Self.client(server, limit: 1, scheduler: clock)
      let held = client.get("hold")
      let never = client.get("never", deadline: .after(.seconds(5)))
      // What the deadline had left when the request was queued (just under 5 s), on the clock.
      clock.advance(by: .seconds(5))
      let (result, _) = await outcome(of: never)
      guard case .timedOut(let url, let deadline)? = httpError(result) else {
        Issue.record("expected timedOut, got \(result)")
        return
      }
      #expect(deadline == .seconds(5))
      #expect(url?.path == "/never")
      #expect(await server.arrived(1))
      held.cancel()
      _ = try await client.get("after").value
      #expect(server.requests.map(\.path) == ["/hold", "/after"])
    }
  }

  @Test func theQueueWaitLimitRunsOnTheClientsScheduler() async throws {
    try await withServer(Self.routes(["/never"])) { server in
      let clock = VirtualTimeScheduler()
      let client = Self.client(server, timeout: .seconds(120), limit: 1, scheduler: clock)
      // The held request's deadline (120 s) is after the queue wait's end (60 s).
      let held = client.get("hold")
      let never = client.get("never")
      clock.advance(by: HTTPClient.defaultMaximumQueueWait - .milliseconds(1))
      #expect(never.isPending)
      clock.advance(by: .milliseconds(1))
      let (result, _) = await outcome(of: never)
      guard case .queueWaitExceeded(let limit, _)? = httpError(result) else {
        Issue.record("expected queueWaitExceeded, got \(result)")
        return
      }
      #expect(limit == HTTPClient.defaultMaximumQueueWait)
      held.cancel()
      #expect(!server.requests.map(\.path).contains("/never"))
    }
  }

  @Test func cancellingAQueuedRequestTakesItOutOfTheQueue() async throws {
    try await withServer(Self.routes(["/cancelled", "/after"])) { server in
      let client = Self.client(server, limit: 1)
      let held = client.get("hold")
      let cancelled = client.get("cancelled")
      let after = client.get("after")
      cancelled.cancel()
      let (result, _) = await outcome(of: cancelled)
      #expect(throws: CancellationError.self) { try result.get() }
      #expect(after.isPending)
      // The cancelled request gave up its place, not the slot: the next one gets it. (`held`
      // is cancelled once it has reached the server: until then it may not have been sent.)
      #expect(await server.arrived(1))
      held.cancel()
      _ = try await after.value
      #expect(server.requests.map(\.path) == ["/hold", "/after"])
    }
  }

  @Test func queuedRequestsAreSentInTheOrderTheyWereMade() async throws {
    let paths = (1...8).map { "/fifo/\($0)" }
    try await withServer(Self.routes(paths)) { server in
      let client = Self.client(server, limit: 1)
      let first = client.get("slow")
      let rest = paths.map { client.get($0) }
      let failures = await Self.failures(of: [first] + rest)
      #expect(failures.isEmpty, "\(failures)")
      #expect(server.requests.map(\.path) == ["/slow"] + paths)
      #expect(server.server.maximumConcurrentRequests == 1)
    }
  }

  @Test func aRequestKeepsItsSlotThroughItsRetries() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/flaky") { _ in
        calls.next() == 1 ? .respond(ServerResponse(status: 503)) : .respond(.text("ok"))
      }
      router.on("GET", "/next") { _ in .respond(.text("next")) }
    }) { server in
      let client = HTTPClient(
        baseURL: server.baseURL,
        configuration: .init(retryPolicy: quickRetries(), maximumConcurrentRequestsPerHost: 1))
      let flaky = client.get("flaky")
      let next = client.get("next")
      _ = try await flaky.value
      _ = try await next.value
      #expect(server.requests.map(\.path) == ["/flaky", "/flaky", "/next"])
    }
  }

  @Test func eachOriginHasItsOwnLimit() async throws {
    try await withServer(Self.routes(["/other"])) { server in
      let client = Self.client(server, limit: 1)
      let held = client.get("hold")
      // 127.0.0.2 is another origin: its request does not wait for 127.0.0.1's slot.
      let other = server.server.secondBaseURL.appendingPathComponent("other").absoluteString
      let response = try await client.get(other).value
      #expect(response.statusCode == 200)
      #expect(held.isPending)
      held.cancel()
    }
  }

  // MARK: The queue alone

  static let origin = RequestQueueKey(URL(string: "http://example.com/")!)
  static let otherOrigin = RequestQueueKey(URL(string: "https://example.com/")!)

  @Test func keysAreSchemeHostAndPort() {
    #expect(RequestQueueKey(URL(string: "http://EXAMPLE.com/a")!) == Self.origin)
    #expect(RequestQueueKey(URL(string: "HTTP://example.com:80/b?q")!) == Self.origin)
    #expect(RequestQueueKey(URL(string: "http://example.com:8080/")!) != Self.origin)
    #expect(RequestQueueKey(URL(string: "https://example.com:443/")!) == Self.otherOrigin)
    #expect(Self.otherOrigin != Self.origin)
    #expect(Self.otherOrigin.description == "example.com:443")
  }

  @Test func jobsUpToTheLimitStartAtOnceAndLaterOnesWait() {
    var state = RequestQueueState<String>(limit: 2)
    #expect(state.enqueue("a", for: Self.origin) == nil)
    #expect(state.enqueue("b", for: Self.origin) == nil)
    #expect(state.enqueue("c", for: Self.origin) != nil)
    #expect(state.enqueue("x", for: Self.otherOrigin) == nil)
    #expect(state.runningCount(for: Self.origin) == 2)
    #expect(state.waitingCount(for: Self.origin) == 1)
    #expect(state.runningCount(for: Self.otherOrigin) == 1)
  }

  @Test func releasingASlotStartsTheOldestWaitingJob() {
    var state = RequestQueueState<Int>(limit: 1)
    #expect(state.enqueue(0, for: Self.origin) == nil)
    for job in 1...5 { #expect(state.enqueue(job, for: Self.origin) != nil) }
    var started: [Int] = []
    while let next = state.release(Self.origin) { started.append(next) }
    #expect(started == [1, 2, 3, 4, 5])
    #expect(state.originCount == 0)
  }

  @Test func aRemovedJobNeverStartsAndTakesNoSlot() throws {
    var state = RequestQueueState<String>(limit: 1)
    #expect(state.enqueue("running", for: Self.origin) == nil)
    let queued = state.enqueue("removed", for: Self.origin)
    let removed = try #require(queued)
    #expect(state.enqueue("next", for: Self.origin) != nil)
    #expect(state.remove(removed) == "removed")
    #expect(state.remove(removed) == nil)
    #expect(state.waitingCount(for: Self.origin) == 1)
    #expect(state.release(Self.origin) == "next")
    #expect(state.release(Self.origin) == nil)
    #expect(state.originCount == 0)
  }

  @Test func aStartedJobCannotBeRemoved() throws {
    var state = RequestQueueState<String>(limit: 1)
    #expect(state.enqueue("a", for: Self.origin) == nil)
    let queued = state.enqueue("b", for: Self.origin)
    let ticket = try #require(queued)
    #expect(state.release(Self.origin) == "b")
    #expect(state.remove(ticket) == nil)
    #expect(state.runningCount(for: Self.origin) == 1)
  }

  @Test func removedJobsLeaveNothingBehind() {
    var state = RequestQueueState<Int>(limit: 1)
    #expect(state.enqueue(0, for: Self.origin) == nil)
    // Many jobs queued and removed again (cancelled, expired): the queue stays small and correct.
    for round in 0..<10_000 {
      if let ticket = state.enqueue(round, for: Self.origin) { _ = state.remove(ticket) }
    }
    #expect(state.waitingCount(for: Self.origin) == 0)
    #expect(state.enqueue(-1, for: Self.origin) != nil)
    #expect(state.release(Self.origin) == -1)
    #expect(state.release(Self.origin) == nil)
    #expect(state.originCount == 0)
  }

  @Test func jobsRunOutsideTheLock() {
    let queue = RequestQueue(limit: 1)
    let log = Log()
    // A job that calls back into the queue would deadlock if it ran under the lock.
    #expect(
      queue.enqueue(Self.origin, start: { log.append("first: \(queue.counts(for: Self.origin))") }) == nil)
    #expect(
      queue.enqueue(Self.origin, start: { log.append("second: \(queue.counts(for: Self.origin))") }) != nil)
    queue.release(Self.origin)
    #expect(log.entries == ["first: (running: 1, waiting: 0)", "second: (running: 1, waiting: 0)"])
    queue.release(Self.origin)
    #expect(queue.counts(for: Self.origin) == (0, 0))
  }

  @Test func manyThreadsNeverExceedTheLimit() async {
    let queue = RequestQueue(limit: 3)
    let gauge = Gauge()
    let done = DispatchGroup()
    let jobs = 2_000
    for _ in 0..<jobs { done.enter() }
    DispatchQueue.concurrentPerform(iterations: jobs) { _ in
      _ = queue.enqueue(Self.origin) {
        gauge.enter()
        DispatchQueue.global().async {
          gauge.leave()
          queue.release(Self.origin)
          done.leave()
        }
      }
    }
    let finished = await offThePool { done.wait(timeout: .now() + 30) == .success }
    #expect(finished)
    #expect(gauge.maximum <= 3)
    #expect(gauge.total == jobs)
    #expect(queue.counts(for: Self.origin) == (0, 0))
  }
}

/// A list of strings appended from any thread.
private final class Log: @unchecked Sendable {
  // Safety: `items` is read and written only while `lock` is held.
  private let lock = NSLock()
  private var items: [String] = []

  func append(_ entry: String) {
    lock.lock()
    items.append(entry)
    lock.unlock()
  }

  var entries: [String] {
    lock.lock()
    defer { lock.unlock() }
    return items
  }
}

/// Counts jobs running at once and the most there ever were.
private final class Gauge: @unchecked Sendable {
  // Safety: every `var` is read and written only while `lock` is held.
  private let lock = NSLock()
  private var running = 0
  private var most = 0
  private var count = 0

  func enter() {
    lock.lock()
    running += 1
    count += 1
    most = max(most, running)
    lock.unlock()
  }

  func leave() {
    lock.lock()
    running -= 1
    lock.unlock()
  }

  var maximum: Int {
    lock.lock()
    defer { lock.unlock() }
    return most
  }

  var total: Int {
    lock.lock()
    defer { lock.unlock() }
    return count
  }
}
