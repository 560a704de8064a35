import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

@Suite("Cancellation", .timeLimit(.minutes(1)))
struct CancellationTests {
  /// A body that takes seconds to trickle in: the server notices when the client goes away.
  static let endless = ServerAction.trickle(
    .text(String(repeating: "x", count: 100_000)), chunkSize: 100, interval: .milliseconds(20))

  @Test func cancellingThePromiseCancelsTheTask() async throws {
    try await withServer({ router in
      router.on("GET", "/stream") { _ in CancellationTests.endless }
    }) { server in
      let promise = server.client().get("stream")
      #expect(await server.arrived(1))
      promise.cancel()
      let (result, _) = await outcome(of: promise)
      #expect(throws: CancellationError.self) { try result.get() }
      // The URLSessionTask was cancelled: its connection closes, which the server sees.
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }

  @Test func cancellingTheAwaitingTaskCancelsTheRequest() async throws {
    try await withServer({ router in
      router.on("GET", "/stream") { _ in CancellationTests.endless }
    }) { server in
      let client = server.client()
      let task = Task { try await client.get("stream").value }
      #expect(await server.arrived(1))
      task.cancel()
      await #expect(throws: CancellationError.self) { try await task.value }
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }

  @Test func nothingIsDeliveredAfterCancellation() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .milliseconds(200)) }
    }) { server in
      let client = server.client()
      let request = client.get("slow")
      let chained = request.map { _ in Issue.record("a cancelled request delivered a response") }
      request.cancel()
      await #expect(throws: CancellationError.self) { try await chained.value }
      // A later request on the same client proves the server answered; the cancelled one stays cancelled.
      _ = try await client.get("slow").value
      #expect(request.result.map { (try? $0.get()) == nil } == true)
    }
  }

  @Test func cancellingDuringBackoffStopsTheRetries() async throws {
    try await withServer({ router in
      router.on("GET", "/flaky") { _ in
        .respond(ServerResponse(status: 503, headers: [("Retry-After", "50")]))
      }
    }) { server in
      // The policy reads its clock when it computes the backoff: that is the signal that the
      // client got the 503 and is about to wait 50 s.
      let backingOff = DispatchSemaphore(value: 0)
      let policy = RetryPolicy(now: {
        backingOff.signal()
        return Date()
      })
      let promise = server.client(retryPolicy: policy, timeout: .seconds(60)).get("flaky")
      #expect(await offThePool { backingOff.wait(timeout: .now() + 30) == .success })
      let start = ContinuousClock.now
      promise.cancel()
      let (result, elapsed) = await outcome(of: promise, since: start)
      #expect(throws: CancellationError.self) { try result.get() }
      // Far below the 50 s backoff.
      #expect(elapsed < .seconds(25))
      #expect(server.requests.count == 1)
    }
  }

  @Test func cancellingAChainedPromiseCancelsTheRequest() async throws {
    try await withServer({ router in
      router.on("GET", "/stream") { _ in CancellationTests.endless }
    }) { server in
      let decoded = server.client().get("stream").text()
      #expect(await server.arrived(1))
      decoded.cancel()
      let (result, _) = await outcome(of: decoded)
      #expect(throws: CancellationError.self) { try result.get() }
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }
}
