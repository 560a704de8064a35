import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

@Suite("Deadline", .timeLimit(.minutes(1)))
struct DeadlineTests {
  /// Generous: the machine is shared and has two cores; the deadline itself is what is tested.
  let margin: Duration = .seconds(3)

  @Test func deadlinesAreNotRoundedToWholeSeconds() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(20)) }
    }) { server in
      // libcurl would truncate 1.5 s to 1 s (and report a transport error); the client's own
      // timer waits the full 1.5 s and reports `timedOut`.
      let client = server.client(timeout: .milliseconds(1500))
      let (result, elapsed) = await outcome(of: client.get("slow"))
      report("slow headers (deadline 1.5 s, not rounded to 1 s)", result, elapsed)
      guard case .timedOut(_, let deadline)? = httpError(result) else { return }
      #expect(deadline == .milliseconds(1500))
      #expect(elapsed >= .milliseconds(1450))
      #expect(elapsed < .milliseconds(1500) + margin)
    }
  }

  @Test func slowHeadersTimeOutAtTheClientsDeadline() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(20)) }
    }) { server in
      let client = server.client(timeout: .milliseconds(300))
      let (result, elapsed) = await outcome(of: client.get("slow"))
      report("slow headers (deadline 300 ms)", result, elapsed)
      guard case .timedOut(let url, let deadline)? = httpError(result) else { return }
      #expect(deadline == .milliseconds(300))
      #expect(url?.path == "/slow")
      #expect(elapsed < .milliseconds(300) + margin)
    }
  }

  @Test func aTrickledBodyPastTheDeadlineTimesOut() async throws {
    try await withServer({ router in
      router.on("GET", "/trickle") { _ in
        .trickle(.text(String(repeating: "x", count: 1000)), chunkSize: 10, interval: .milliseconds(50))
      }
    }) { server in
      let client = server.client(timeout: .milliseconds(400))
      let (result, elapsed) = await outcome(of: client.get("trickle"))
      report("trickled body past deadline (400 ms)", result, elapsed)
      guard case .timedOut? = httpError(result) else { return }
      #expect(elapsed < .milliseconds(400) + margin)
    }
  }

  @Test func oneDeadlineCoversAWholeChain() async throws {
    try await withServer({ router in
      router.on("GET", "/first") { _ in .respond(.text("1")) }
      router.on("GET", "/second") { _ in .slowHeaders(.text("2"), delay: .seconds(20)) }
    }) { server in
      // The client's own timeout is 30 s: only the chain's deadline can end this within a second.
      let client = server.client(timeout: .seconds(30))
      let deadline = Deadline.after(.seconds(1))
      let chain = client.get("first", deadline: deadline).then { _ in
        client.get("second", deadline: deadline)
      }
      let (result, elapsed) = await outcome(of: chain)
      report("chain deadline (1 s over two requests)", result, elapsed)
      guard case .timedOut(_, let allowed)? = httpError(result) else { return }
      #expect(allowed == .seconds(1))
      #expect(elapsed < .seconds(1) + margin)
    }
  }

  @Test func theEarlierOfTheDeadlineAndTheTimeoutApplies() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(20)) }
    }) { server in
      let client = server.client(timeout: .milliseconds(200))
      let (result, _) = await outcome(of: client.get("slow", deadline: .after(.seconds(30))))
      guard case .timedOut(_, let allowed)? = httpError(result) else { return }
      #expect(allowed == .milliseconds(200))
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
}
