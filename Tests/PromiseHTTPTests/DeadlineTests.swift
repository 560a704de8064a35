import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

@Suite("Deadline", .timeLimit(.minutes(1)))
struct DeadlineTests {
  // MARK: On virtual time: exact, and no wall-clock wait

  @Test func deadlinesAreExactToTheMillisecondNotRoundedToWholeSeconds() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(20)) }
    }) { server in
      // libcurl would truncate 1.5 s to 1 s; the client's own timer ends it at 1.5 s exactly.
      let clock = VirtualTimeScheduler()
      let client = server.client(timeout: .milliseconds(1500), scheduler: clock)
      let request = client.get("slow")
      #expect(await server.arrived(1))
      clock.advance(by: .milliseconds(1499))
      #expect(request.isPending)
      clock.advance(by: .milliseconds(1))
      let (result, _) = await outcome(of: request)
      guard case .timedOut(let url, let deadline)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(deadline == .milliseconds(1500))
      #expect(url?.path == "/slow")
    }
  }

  @Test func aTrickledBodyPastTheDeadlineTimesOut() async throws {
    try await withServer({ router in
      router.on("GET", "/trickle") { _ in
        .trickle(.text(String(repeating: "x", count: 1000)), chunkSize: 10, interval: .milliseconds(50))
      }
    }) { server in
      let clock = VirtualTimeScheduler()
      let request = server.client(timeout: .milliseconds(400), scheduler: clock).get("trickle")
      #expect(await server.arrived(1))
      clock.advance(by: .milliseconds(400))
      let (result, elapsed) = await outcome(of: request)
      report("trickled body past deadline (400 ms, virtual)", result, elapsed)
      guard case .timedOut? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
    }
  }

  @Test func oneDeadlineCoversAWholeChain() async throws {
    try await withServer({ router in
      router.on("GET", "/first") { _ in .respond(.text("1")) }
      router.on("GET", "/second") { _ in .slowHeaders(.text("2"), delay: .seconds(20)) }
    }) { server in
      // The client's own timeout is 30 s: only the chain's deadline can end this at 1 s.
      let clock = VirtualTimeScheduler()
      let client = server.client(timeout: .seconds(30), scheduler: clock)
      let deadline = Deadline.after(.seconds(1))
      let chain = client.get("first", deadline: deadline).then { _ in
        client.get("second", deadline: deadline)
      }
      #expect(await server.arrived(2))
      // The second request got what was left of the deadline in real time, on virtual time.
      clock.advance(by: .seconds(1))
      let (result, _) = await outcome(of: chain)
      guard case .timedOut(_, let allowed)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(allowed == .seconds(1))
    }
  }

  @Test func theEarlierOfTheDeadlineAndTheTimeoutApplies() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(20)) }
    }) { server in
      let clock = VirtualTimeScheduler()
      let client = server.client(timeout: .milliseconds(200), scheduler: clock)
      let request = client.get("slow", deadline: .after(.seconds(30)))
      #expect(await server.arrived(1))
      let (result, _) = await outcome(of: request.timeoutOnVirtualClock(clock, after: .milliseconds(200)))
      guard case .timedOut(_, let allowed)? = httpError(result) else {
        Issue.record("expected a timeout, got \(result)")
        return
      }
      #expect(allowed == .milliseconds(200))
    }
  }

  @Test func aServerThatNeverAnswersTimesOutAsSoonAsTheClockPassesTheTimeout() async throws {
    try await withServer({ router in
      router.on("GET", "/never") { _ in .slowHeaders(.text("late"), delay: .seconds(20)) }
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
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(20)) }
    }) { server in
      let client = server.client(timeout: .milliseconds(300))
      let (result, elapsed) = await outcome(of: client.get("slow"))
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
