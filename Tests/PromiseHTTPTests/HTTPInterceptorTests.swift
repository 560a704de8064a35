import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Collects lines or events from steps, in arrival order.
final class Recorder<Item: Sendable>: @unchecked Sendable {
  // Safety: `items` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var items: [Item] = []

  func append(_ item: Item) { lock.withLock { items.append(item) } }

  var all: [Item] { lock.withLock { items } }
}

/// Adds `X-Step: <name>` (appending to what earlier steps put), after a hop to another queue.
private struct Tagging: HTTPInterceptor {
  let name: String

  func adapt(_ request: URLRequest, for attempt: HTTPAttempt) -> Promise<URLRequest> {
    Promise.after(.zero).map { _ in
      var request = request
      let previous = request.value(forHTTPHeaderField: "X-Step").map { "\($0)," } ?? ""
      request.setValue(previous + name, forHTTPHeaderField: "X-Step")
      return request
    }
  }
}

/// Retries a 200 whose body says "again", once per attempt, after `delay`.
private struct RetryOnAgain: HTTPInterceptor {
  let delay: Duration

  func decide(
    _ outcome: Result<HTTPResponse, HTTPError>, for request: URLRequest, attempt: HTTPAttempt
  ) -> Promise<HTTPDecision> {
    guard case .success(let response) = outcome, response.text == "again" else { return Promise(.proceed) }
    return Promise(.retry(after: delay))
  }
}

/// Records the name of every event it observes.
private struct Observing: HTTPInterceptor {
  let events: Recorder<String>

  func observe(_ event: HTTPEvent) {
    switch event {
    case .willSend(_, let attempt): events.append("willSend \(attempt.number)")
    case .didReceive(let response, _): events.append("didReceive \(response.statusCode)")
    case .didFail: events.append("didFail")
    case .willRetry(_, let attempt): events.append("willRetry \(attempt.number)")
    case .didFinish(let result): events.append("didFinish \((try? result.get().statusCode) ?? 0)")
    }
  }
}

private struct Refusal: Error, Equatable {
  let step: String
}

@Suite("HTTPInterceptor", .timeLimit(.minutes(1)))
struct HTTPInterceptorTests {
  @Test func stepsAdaptTheRequestInOrderEvenAsynchronously() async throws {
    try await withServer({ router in
      router.on("GET", "/x") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client(interceptors: [Tagging(name: "a"), Tagging(name: "b")])
      _ = try await client.get("x").value
      #expect(server.requests.map { $0.header("X-Step") } == ["a,b"])
    }
  }

  @Test func aStepsDecisionRetriesOnTheClientsScheduler() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/x") { _ in .respond(.text(calls.next() == 1 ? "again" : "done")) }
    }) { server in
      let clock = VirtualTimeScheduler()
      let events = Recorder<String>()
      let client = server.client(
        interceptors: [RetryOnAgain(delay: .seconds(7)), Observing(events: events)], scheduler: clock)
      let request = client.get("x").text()
      #expect(await server.arrived(1))
      try await clock.waitForPendingWork(count: 2)  // the deadline and the retry's wait
      #expect(clock.nextDeadline == .seconds(7))
      clock.advance(by: .seconds(7))
      let text = try await request.value
      #expect(text == "done")
      #expect(server.requests.count == 2)
      // Observation is dispatched: the last event may trail the promise by a queue hop.
      #expect(await eventually { events.all.count == 6 })
      #expect(
        events.all == [
          "willSend 1", "didReceive 200", "willRetry 1", "willSend 2", "didReceive 200", "didFinish 200",
        ])
    }
  }

  @Test func aStepThatFailsEndsTheRequestWithItsErrorAndNothingIsSent() async throws {
    struct Refusing: HTTPInterceptor {
      func adapt(_ request: URLRequest, for attempt: HTTPAttempt) -> Promise<URLRequest> {
        Promise(error: Refusal(step: "adapt"))
      }
    }
    try await withServer({ router in
      router.on("GET", "/x") { _ in .respond(.text("ok")) }
    }) { server in
      let (result, _) = await outcome(of: server.client(interceptors: [Refusing()]).get("x"))
      #expect(throws: Refusal(step: "adapt")) { try result.get() }
      #expect(server.requests.isEmpty)
    }
  }

  @Test func aFailDecisionRejectsWithTheStepsError() async throws {
    struct Failing: HTTPInterceptor {
      func decide(
        _ outcome: Result<HTTPResponse, HTTPError>, for request: URLRequest, attempt: HTTPAttempt
      ) -> Promise<HTTPDecision> {
        Promise(.fail(Refusal(step: "decide")))
      }
    }
    try await withServer({ router in
      router.on("GET", "/x") { _ in .respond(.text("ok")) }
    }) { server in
      let (result, _) = await outcome(of: server.client(interceptors: [Failing()]).get("x"))
      #expect(throws: Refusal(step: "decide")) { try result.get() }
    }
  }

  @Test func theAuthenticatorRunsBeforeTheUsersStepsAndTheRetryPolicyAfterThem() async throws {
    try await withServer({ router in
      router.on("GET", "/x") { _ in .respond(.text("down", status: 503)) }
    }) { server in
      let client = server.client(
        retryPolicy: quickRetries(2), authenticator: TokenAuthenticator { Promise("t") },
        interceptors: [Tagging(name: "mine")])
      let (result, _) = await outcome(of: client.get("x"))
      #expect(httpError(result)?.statusCode == 503)
      #expect(server.requests.count == 2)
      #expect(server.requests.allSatisfy { $0.header("Authorization") == "Bearer t" })
      #expect(server.requests.allSatisfy { $0.header("X-Step") == "mine" })
    }
  }

  // MARK: The chain alone

  @Test func theFirstDecisionOtherThanProceedWins() async throws {
    struct Fixed: HTTPInterceptor {
      let decision: HTTPDecision
      let asked: Recorder<String>
      let name: String

      func decide(
        _ outcome: Result<HTTPResponse, HTTPError>, for request: URLRequest, attempt: HTTPAttempt
      ) -> Promise<HTTPDecision> {
        asked.append(name)
        return Promise(decision)
      }
    }
    let asked = Recorder<String>()
    let chain = InterceptorChain(
      [
        Fixed(decision: .proceed, asked: asked, name: "first"),
        Fixed(decision: .retry(after: .seconds(1)), asked: asked, name: "second"),
        Fixed(decision: .deliver, asked: asked, name: "third"),
      ], queue: DispatchQueue(label: "chain"))
    let url = try #require(URL(string: "http://127.0.0.1:9/x"))
    let decided = Recorder<Duration?>()
    chain.decide(
      .success(HTTPResponse(statusCode: 503, headers: [:], requestURL: url)), for: URLRequest(url: url),
      attempt: HTTPAttempt(number: 1, method: .get, remaining: .seconds(5))
    ) { result in
      if case .success(.retry(let delay)) = result { decided.append(delay) } else { decided.append(nil) }
    }
    // Every step answered with a settled promise: the chain followed them at once.
    #expect(decided.all == [.seconds(1)])
    #expect(asked.all == ["first", "second"])
  }
}
