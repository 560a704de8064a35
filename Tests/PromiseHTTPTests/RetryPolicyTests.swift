import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

@Suite("RetryPolicy", .timeLimit(.minutes(1)))
struct RetryPolicyTests {
  // MARK: The policy alone

  @Test func defaultsAreTheDocumentedOnes() {
    let policy = RetryPolicy.default
    #expect(policy.maximumAttempts == 3)
    #expect(policy.retryableStatusCodes == [408, 429, 500, 502, 503, 504])
    #expect(policy.retryableMethods == [.get, .head, .put, .delete, .options])
    #expect(!policy.allowsRetry(of: .post) && !policy.allowsRetry(of: .patch))
    #expect(policy.allowsRetry(of: .get))
    #expect(!RetryPolicy.none.allowsRetry(of: .get))
  }

  @Test func backoffIsTheCoresRetryDelayCappedAndCounted() {
    let exact = RetryPolicy(
      maximumAttempts: 10, backoff: .exponential(initial: .milliseconds(100), maximum: .milliseconds(500)))
    #expect(exact.delay(beforeRetry: 1) == .milliseconds(100))
    #expect(exact.delay(beforeRetry: 2) == .milliseconds(200))
    #expect(exact.delay(beforeRetry: 3) == .milliseconds(400))
    #expect(exact.delay(beforeRetry: 4) == .milliseconds(500))
    #expect(exact.delay(beforeRetry: 10) == nil)
    #expect(exact.delay(beforeRetry: 0) == nil)
    #expect(
      RetryPolicy.defaultBackoff
        == .exponential(initial: .milliseconds(500), multiplier: 2, maximum: .seconds(10), jitter: .full))
  }

  @Test func jitterIsDrawnFromTheGeneratorAsPromiseRetryDrawsIt() {
    let backoff = RetryDelay.exponential(initial: .milliseconds(100), maximum: .seconds(10), jitter: .full)
    let policy = RetryPolicy(maximumAttempts: 10, backoff: backoff, generator: SplitMix(seed: 7))
    var generator = SplitMix(seed: 7)
    for retry in 1...9 {
      let expected = backoff.duration(beforeRetry: retry, using: &generator)
      #expect(policy.delay(beforeRetry: retry) == expected)
      #expect(expected >= .zero && expected <= .milliseconds(min(100 << (retry - 1), 10_000)))
    }
    let again = RetryPolicy(maximumAttempts: 10, backoff: backoff, generator: SplitMix(seed: 7))
    var replayed = SplitMix(seed: 7)
    #expect(
      (1...9).allSatisfy {
        again.delay(beforeRetry: $0) == backoff.duration(beforeRetry: $0, using: &replayed)
      })
  }

  @Test func requestsSharingASeededPolicyDoNotRetryInStep() {
    let backoff = RetryDelay.exponential(initial: .milliseconds(100), maximum: .seconds(10), jitter: .full)
    let policy = RetryPolicy(maximumAttempts: 3, backoff: backoff, generator: SplitMix(seed: 7))
    // Twenty requests, each with its copy of the policy (as a client hands it to each request),
    // waiting before their first retry: one seed, twenty different waits.
    let waits = (0..<20).map { _ in
      let copy = policy
      return copy.delay(beforeRetry: 1)
    }
    #expect(Set(waits).count == 20, "\(waits)")
  }

  @Test func onlyRetryableOutcomesOfRetryableMethodsAreRetried() throws {
    let policy = RetryPolicy(backoff: .constant(.milliseconds(5)))
    let url = try #require(URL(string: "http://h/x"))
    let busy = HTTPResponse(statusCode: 503, headers: [:], requestURL: url)
    let get = HTTPAttempt(number: 1, method: .get, remaining: .seconds(1))
    #expect(retryDelay(policy.decision(for: .success(busy), attempt: get)) == .milliseconds(5))
    let refused = HTTPError.transport(URLError(.cannotConnectToHost), url: url)
    #expect(retryDelay(policy.decision(for: .failure(refused), attempt: get)) == .milliseconds(5))
    let post = HTTPAttempt(number: 1, method: .post, remaining: .seconds(1))
    #expect(retryDelay(policy.decision(for: .success(busy), attempt: post)) == nil)
    let accepted = HTTPAttempt(
      number: 1, method: .get, acceptableStatusCodes: 200..<600, remaining: .seconds(1))
    #expect(retryDelay(policy.decision(for: .success(busy), attempt: accepted)) == nil)
    let notFound = HTTPResponse(statusCode: 404, headers: [:], requestURL: url)
    #expect(retryDelay(policy.decision(for: .success(notFound), attempt: get)) == nil)
    let last = HTTPAttempt(number: 3, method: .get, remaining: .seconds(1))
    #expect(retryDelay(policy.decision(for: .success(busy), attempt: last)) == nil)
    let limited = HTTPResponse(statusCode: 429, headers: ["Retry-After": "2"], requestURL: url)
    #expect(retryDelay(policy.decision(for: .success(limited), attempt: get)) == .seconds(2))
  }

  private func retryDelay(_ decision: HTTPDecision) -> Duration? {
    if case .retry(let delay) = decision { return delay }
    return nil
  }

  @Test func retryAfterIsHonouredInBothForms() throws {
    let now = Date(timeIntervalSince1970: 1_700_000_000)
    let policy = RetryPolicy(now: { now })
    #expect(policy.delay(beforeRetry: 1, retryAfter: "3") == .seconds(3))
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    let inFiveSeconds = formatter.string(from: now.addingTimeInterval(5))
    #expect(policy.delay(beforeRetry: 1, retryAfter: inFiveSeconds) == .seconds(5))
    let past = formatter.string(from: now.addingTimeInterval(-60))
    #expect(policy.delay(beforeRetry: 1, retryAfter: past) == .zero)
    #expect(policy.delay(beforeRetry: 1, retryAfter: "3600") == nil)
    #expect(RetryPolicy.parseRetryAfter("soon", now: now) == nil)
    #expect(RetryPolicy.parseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == .zero)
    #expect(RetryPolicy.parseRetryAfter("Sun Nov  6 08:49:37 1994", now: now) == .zero)
  }

  // MARK: Over the wire

  @Test func fiveHundredsThenSuccessAreRetried() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/flaky") { _ in
        calls.next() < 3 ? .respond(.text("oops", status: 502)) : .respond(.text("fine"))
      }
    }) { server in
      let (result, elapsed) = await outcome(
        of: server.client(retryPolicy: quickRetries()).get("flaky").text())
      report("502, 502, then 200 (retried)", result, elapsed)
      let text = try result.get()
      #expect(text == "fine")
      #expect(server.requests.count == 3)
    }
  }

  @Test func retryAfterSecondsOn429AndDateOn503AreHonoured() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/limited") { _ in
        switch calls.next() {
        case 1: return .respond(ServerResponse(status: 429, headers: [("Retry-After", "0")]))
        case 2:
          return .respond(
            ServerResponse(status: 503, headers: [("Retry-After", "Thu, 01 Jan 1970 00:00:00 GMT")]))
        default: return .respond(.text("ok"))
        }
      }
    }) { server in
      // The backoff would be a minute: only the Retry-After values (zero) let this finish quickly.
      let policy = RetryPolicy(backoff: .constant(.seconds(60)))
      let (result, elapsed) = await outcome(of: server.client(retryPolicy: policy).get("limited").text())
      report("429 Retry-After: 0, 503 Retry-After: <past date>, then 200", result, elapsed)
      let text = try result.get()
      #expect(text == "ok")
      // Far below the minute of the backoff (a loaded machine has stalled tests for 5-13 s).
      #expect(elapsed < .seconds(30))
    }
  }

  @Test func aRetryAfterBeyondTheDeadlineReportsTheStatusAtOnce() async throws {
    try await withServer({ router in
      router.on("GET", "/busy") { _ in .respond(ServerResponse(status: 503, headers: [("Retry-After", "30")]))
      }
    }) { server in
      // On a clock that never moves: the status can only arrive if no wait was started.
      let clock = VirtualTimeScheduler()
      let client = server.client(retryPolicy: .default, timeout: .seconds(10), scheduler: clock)
      let (result, elapsed) = await outcome(of: client.get("busy"))
      report("503 Retry-After: 30 with a 10 s deadline", result, elapsed)
      #expect(httpError(result)?.statusCode == 503)
      #expect(clock.now == .zero)
      #expect(clock.pendingCount == 0)
      #expect(server.requests.count == 1)
    }
  }

  @Test func aRetryAfterIsWaitedOnTheClientsScheduler() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/limited") { _ in
        calls.next() == 1
          ? .respond(ServerResponse(status: 429, headers: [("Retry-After", "5")])) : .respond(.text("ok"))
      }
    }) { server in
      let clock = VirtualTimeScheduler()
      let client = server.client(retryPolicy: .default, timeout: .seconds(60), scheduler: clock)
      let request = client.get("limited").text()
      // The deadline's timer and the backoff's.
      try await clock.waitForPendingWork(count: 2)
      #expect(clock.nextDeadline == .seconds(5))
      clock.advance(by: .milliseconds(4999))
      #expect(server.requests.count == 1)
      clock.advance(by: .milliseconds(1))
      let text = try await request.value
      #expect(text == "ok")
      #expect(server.requests.count == 2)
    }
  }

  @Test func theBackoffIsWaitedOnTheClientsScheduler() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/flaky") { _ in
        calls.next() < 3 ? .respond(.text("oops", status: 502)) : .respond(.text("ok"))
      }
    }) { server in
      let clock = VirtualTimeScheduler()
      let policy = RetryPolicy(backoff: .exponential(initial: .seconds(20), maximum: .seconds(40)))
      let client = server.client(retryPolicy: policy, timeout: .seconds(120), scheduler: clock)
      let request = client.get("flaky").text()
      // 20 s, then 40 s of backoff, in no time: each advance ends one wait.
      for (arrivals, wakeUp) in [(1, Duration.seconds(20)), (2, .seconds(60))] {
        #expect(await server.arrived(arrivals))
        try await clock.waitForPendingWork(count: 2)  // the deadline and the backoff
        #expect(clock.nextDeadline == wakeUp)
        clock.advance(to: wakeUp)
      }
      let text = try await request.value
      #expect(text == "ok")
      #expect(server.requests.count == 3)
    }
  }

  @Test func noRetryStartsThatWouldEndPastTheDeadline() async throws {
    try await withServer({ router in
      router.on("GET", "/down") { _ in .respond(.text("down", status: 500)) }
    }) { server in
      // The first wait fits (10 s of 15), the second (20 s) would not: 2 attempts, then the status.
      let clock = VirtualTimeScheduler()
      let policy = RetryPolicy(maximumAttempts: 5, backoff: .exponential(initial: .seconds(10)))
      let client = server.client(retryPolicy: policy, timeout: .seconds(15), scheduler: clock)
      let request = client.get("down")
      #expect(await server.arrived(1))
      try await clock.waitForPendingWork(count: 2)  // the deadline and the backoff
      #expect(clock.nextDeadline == .seconds(10))
      clock.advance(to: .seconds(10))
      let (result, _) = await outcome(of: request)
      #expect(httpError(result)?.statusCode == 500)
      #expect(server.requests.count == 2)
      #expect(clock.now == .seconds(10))
    }
  }

  @Test func postIsNotRetried() async throws {
    try await withServer({ router in
      router.on("POST", "/order") { _ in .respond(.text("down", status: 503)) }
    }) { server in
      let (result, _) = await outcome(of: server.client(retryPolicy: quickRetries()).post("order"))
      #expect(httpError(result)?.statusCode == 503)
      #expect(server.requests.count == 1)
    }
  }

  @Test func connectionFailuresAreRetried() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/shaky") { _ in calls.next() == 1 ? .closeImmediately : .respond(.text("ok")) }
    }) { server in
      let (result, elapsed) = await outcome(
        of: server.client(retryPolicy: quickRetries()).get("shaky").text())
      report("connection closed, then 200 (retried)", result, elapsed)
      let text = try result.get()
      #expect(text == "ok")
    }
  }

  @Test func attemptsStopAtTheMaximum() async throws {
    try await withServer({ router in
      router.on("GET", "/down") { _ in .respond(.text("down", status: 500)) }
    }) { server in
      let (result, _) = await outcome(of: server.client(retryPolicy: quickRetries(4)).get("down"))
      #expect(httpError(result)?.statusCode == 500)
      #expect(server.requests.count == 4)
    }
  }
}

/// A seeded SplitMix64: the same seed gives the same draws.
struct SplitMix: RandomNumberGenerator, Sendable {
  var state: UInt64

  init(seed: UInt64) {
    state = seed
  }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
