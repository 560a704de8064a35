import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

@Suite("Deadline", .timeLimit(.minutes(1)))
struct DeadlineTests {
  /// How long the server holds a response the test must see time out: longer than the suite's
  /// time limit, so that the answer cannot arrive first even when the whole process stalls
  /// (under ThreadSanitizer, with a child test process loading both cores, three virtual-time
  /// tests were resumed after more than 20 s, when a 20 s delay had already answered). The
  /// server's sleep ends when it stops, so nothing waits for it.
  static let neverInTime: Duration = .seconds(300)
  // MARK: On virtual time: exact, and no wall-clock wait
  //
  // The timeouts are of several seconds although no test waits for them: libcurl's own
  // timeout, set 1 s beyond what is left of the client's deadline, is a backstop in real time,
  // and a request must not meet it while a loaded machine gets the test to `advance`.

  @Test func deadlinesAreExactToTheMillisecondNotRoundedToWholeSeconds() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(50)) }
    }) { server in
      // libcurl would truncate 30.5 s to 30 s; the client's own timer ends it at 30.5 s exactly.
      // (Once 10.5 s: under ThreadSanitizer, with the whole suite running, getting from the
      // request to `advance` took longer than libcurl's real-time backstop of 11.5 s.)
      let clock = VirtualTimeScheduler()
      let client = server.client(timeout: .milliseconds(30_500), scheduler: clock)
      let request = client.get("slow")
      #expect(await server.arrived(1))
      clock.advance(by: .milliseconds(30_499))
      #expect(request.isPending)
      clock.advance(by: .milliseconds(1))
      let (result, _) = await outcome(of: request)
      guard case .timedOut(let url, let deadline)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(deadline == .milliseconds(30_500))
      #expect(url?.path == "/slow")
    }
  }

  @Test func aTrickledBodyPastTheDeadlineTimesOut() async throws {
    try await withServer({ router in
      router.on("GET", "/trickle") { _ in
        .trickle(.text(String(repeating: "x", count: 1000)), chunkSize: 10, interval: .milliseconds(500))
      }
    }) { server in
      let clock = VirtualTimeScheduler()
      // The body takes 50 s to trickle in; the 30 s deadline passes when the clock says so
      // (libcurl's real-time backstop is 31 s away).
      let request = server.client(timeout: .seconds(30), scheduler: clock).get("trickle")
      #expect(await server.arrived(1))
      clock.advance(by: .seconds(30))
      let (result, elapsed) = await outcome(of: request)
      report("trickled body past deadline (30 s, virtual)", result, elapsed)
      guard case .timedOut? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
    }
  }

  @Test func oneDeadlineCoversAWholeChain() async throws {
    try await withServer({ router in
      router.on("GET", "/first") { _ in .respond(.text("1")) }
      router.on("GET", "/second") { _ in .slowHeaders(.text("2"), delay: Self.neverInTime) }
    }) { server in
      // The client's own timeout is 60 s: only the chain's deadline can end this at 20 s.
      let clock = VirtualTimeScheduler()
      let client = server.client(timeout: .seconds(60), scheduler: clock)
      let deadline = Deadline.after(.seconds(20))
      let chain = client.get("first", deadline: deadline).then { _ in
        client.get("second", deadline: deadline)
      }
      #expect(await server.arrived(2))
      // The second request got what was left of the deadline in real time, on virtual time.
      clock.advance(by: .seconds(20))
      let (result, _) = await outcome(of: chain)
      guard case .timedOut(_, let allowed)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(allowed == .seconds(20))
    }
  }

  @Test func theEarlierOfTheDeadlineAndTheTimeoutApplies() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: Self.neverInTime) }
    }) { server in
      let clock = VirtualTimeScheduler()
      let client = server.client(timeout: .seconds(20), scheduler: clock)
      let request = client.get("slow", deadline: .after(.seconds(40)))
      #expect(await server.arrived(1))
      let (result, _) = await outcome(of: request.timeoutOnVirtualClock(clock, after: .seconds(20)))
      guard case .timedOut(_, let allowed)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(allowed == .seconds(20))
    }
  }

  @Test func aServerThatNeverAnswersTimesOutAsSoonAsTheClockPassesTheTimeout() async throws {
    try await withServer({ router in
      router.on("GET", "/never") { _ in .slowHeaders(.text("late"), delay: Self.neverInTime) }
    }) { server in
      let clock = VirtualTimeScheduler()
      let request = server.client(timeout: .seconds(30), scheduler: clock).get("never")
      #expect(await server.arrived(1))
      // 30 s of timeout in no time at all: the timer fires when the clock passes it.
      let (result, elapsed) = await outcome(of: request.timeoutOnVirtualClock(clock, after: .seconds(30)))
      guard case .timedOut(_, let allowed)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(allowed == .seconds(30))
      #expect(elapsed < .seconds(20))
      #expect(clock.pendingCount == 0)
    }
  }

  // MARK: On the default clock: real time is wired

  @Test func slowHeadersTimeOutAtTheClientsDeadlineInRealTime() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: Self.neverInTime) }
    }) { server in
      let client = server.client(timeout: .milliseconds(300))
      let start = ContinuousClock.now
      let (result, elapsed) = await outcome(of: client.get("slow"), since: start)
      report("slow headers (deadline 300 ms, real time)", result, elapsed)
      guard case .timedOut(let url, let deadline)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(deadline == .milliseconds(300))
      #expect(url?.path == "/slow")
      #expect(elapsed >= .milliseconds(290))
      // The server holds the headers for 20 s: only the client's timer ends it sooner.
      #expect(elapsed < .seconds(15))
    }
  }

  // MARK: Durations too long for the clock: never, not now

  @Test func aHugeClientTimeoutLetsASlowRequestSucceed() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .milliseconds(200)) }
    }) { server in
      // Once fired at once (a deadline past 2^63 ns), and crashed FoundationNetworking, which
      // multiplies `timeoutInterval` by 1000 (the client passed 9.2e18 s on).
      let client = server.client(timeout: .seconds(Int64.max))
      let (result, elapsed) = await outcome(of: client.get("slow"))
      report("slow headers (timeout .seconds(Int64.max))", result, elapsed)
      let response = try result.get()
      #expect(response.body == Data("late".utf8))
    }
  }

  @Test(arguments: [Duration.seconds(Int64.max), .seconds(Int64.max / 2), .nanoseconds(Int64.max / 2)])
  func aHugeDeadlineLetsASlowRequestSucceed(allowed: Duration) async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .milliseconds(200)) }
    }) { server in
      let deadline = Deadline.after(allowed)
      #expect(!deadline.hasPassed)
      #expect(deadline.remaining > .seconds(100 * 365 * 86_400))
      let client = server.client(timeout: .seconds(Int64.max / 2))
      let (result, _) = await outcome(of: client.get("slow", deadline: deadline))
      let response = try result.get()
      #expect(response.body == Data("late".utf8))
    }
  }

  @Test(arguments: [Duration.seconds(Int64.max), .seconds(Int64.max / 2)])
  func aHugeQueueWaitLetsAQueuedRequestWaitItsTurn(wait: Duration) async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .milliseconds(200)) }
    }) { server in
      let client = HTTPClient(
        baseURL: server.baseURL,
        configuration: .init(
          retryPolicy: .none, maximumConcurrentRequestsPerHost: 1, maximumQueueWait: wait))
      let first = client.get("slow")
      let queued = client.get("slow")
      let (firstResponse, queuedResponse) = (try await first.value, try await queued.value)
      #expect(firstResponse.statusCode == 200)
      #expect(queuedResponse.statusCode == 200)
    }
  }

  @Test func deadlinesReportTheirRemainingTime() {
    let deadline = Deadline.after(.seconds(10))
    #expect(deadline.remaining > .seconds(9) && deadline.remaining <= .seconds(10))
    #expect(!deadline.hasPassed)
    #expect(Deadline.after(.zero).hasPassed)
    #expect(Deadline.after(.seconds(1)) < deadline)
    #expect(!Deadline.distantFuture.hasPassed)
  }

  @Test func schedulersReportTheTimeOfTheirOwnClock() {
    let clock = VirtualTimeScheduler()
    let virtual: any PromiseScheduler = clock
    #expect(virtual.now == .zero)
    clock.advance(by: .seconds(90))
    #expect(virtual.now == .seconds(90))
    // The default reading is the monotonic clock, between two readings taken around it.
    let real: any PromiseScheduler = DispatchTimeScheduler()
    let before = Duration.nanoseconds(Int64(DispatchTime.now().uptimeNanoseconds))
    let reading = real.now
    let after = Duration.nanoseconds(Int64(DispatchTime.now().uptimeNanoseconds))
    #expect(before <= reading && reading <= after)
  }
}

extension Promise {
  /// Advances `clock` by `delay` and returns this promise, for a request whose deadline is due
  /// then: it has settled by the time `advance` returns.
  func timeoutOnVirtualClock(_ clock: VirtualTimeScheduler, after delay: Duration) -> Promise {
    clock.advance(by: delay)
    #expect(!isPending, "not settled when the virtual clock passed \(delay)")
    return self
  }
}
