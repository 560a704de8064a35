import Dispatch
import Foundation
import Promises
import Testing

private typealias Kit = CombinatorTestKit

@Suite("Promise.retry and RetryDelay", .timeLimit(.minutes(1)))
struct PromiseRetryTests {
  @Test("a first attempt that succeeds is the result, with no wait")
  func firstAttemptSucceeds() async throws {
    let clock = VirtualTimeScheduler()
    let calls = Kit.Locked(0)
    let result = Promise.retry(attempts: 3, delay: .constant(.seconds(1)), scheduler: clock) {
      calls.withValue { $0 += 1 }
      return Promise(42)
    }
    #expect(try await result.value == 42)
    #expect(calls.value == 1)
    #expect(clock.pendingCount == 0)
  }

  @Test("the first attempt starts asynchronously, after retry has returned")
  func firstAttemptIsAsynchronous() async throws {
    let queue = DispatchQueue(label: "retry.async")
    let calls = Kit.Locked(0)
    // While this block holds the serial queue, an attempt dispatched to it cannot start.
    let result = queue.sync {
      let result = Promise.retry(on: queue, attempts: 1) { () -> Promise<Int> in
        calls.withValue { $0 += 1 }
        return Promise(1)
      }
      #expect(calls.value == 0)
      return result
    }
    #expect(try await result.value == 1)
    #expect(calls.value == 1)
  }

  @Test("it retries until an attempt succeeds", arguments: Kit.QueueKind.allCases)
  func retriesUntilSuccess(kind: CombinatorTestKit.QueueKind) async throws {
    let queue = kind.makeQueue()
    let calls = Kit.Locked(0)
    let result = Promise<String>.retry(on: queue, attempts: 5) {
      dispatchPrecondition(condition: .onQueue(queue))
      let call = calls.withValue { calls in
        calls += 1
        return calls
      }
      return call < 3 ? Promise(error: Kit.Failure(call)) : Promise("ok on \(call)")
    }
    #expect(try await result.value == "ok on 3")
    #expect(calls.value == 3)
  }

  @Test("after the last attempt it rejects with the last error")
  func rejectsWithLastError() async throws {
    let calls = Kit.Locked(0)
    let result = Promise<Int>.retry(attempts: 4) {
      Promise(
        error: Kit.Failure(
          calls.withValue { calls in
            calls += 1
            return calls
          }))
    }
    await #expect(throws: Kit.Failure(4)) { try await result.value }
    #expect(calls.value == 4)
  }

  @Test("a throwing attempt counts as a failed attempt")
  func throwingAttemptIsRetried() async throws {
    let calls = Kit.Locked(0)
    let result = Promise<Int>.retry(attempts: 2) {
      let call = calls.withValue { calls in
        calls += 1
        return calls
      }
      if call == 1 { throw Kit.Failure(1) }
      return Promise(call)
    }
    #expect(try await result.value == 2)
  }

  @Test("shouldRetry decides which errors are retried, on the given queue", arguments: Kit.QueueKind.allCases)
  func shouldRetryDecides(kind: CombinatorTestKit.QueueKind) async throws {
    let queue = kind.makeQueue()
    let calls = Kit.Locked(0)
    let result = Promise<Int>.retry(
      on: queue, attempts: 10,
      shouldRetry: { error in
        dispatchPrecondition(condition: .onQueue(queue))
        return (error as? Kit.Failure)?.code != 3
      }
    ) {
      Promise(
        error: Kit.Failure(
          calls.withValue { calls in
            calls += 1
            return calls
          }))
    }
    await #expect(throws: Kit.Failure(3)) { try await result.value }
    #expect(calls.value == 3)
  }

  @Test("a CancellationError is not retried by default")
  func cancellationIsNotRetried() async throws {
    let calls = Kit.Locked(0)
    let result = Promise<Int>.retry(attempts: 5) {
      calls.withValue { $0 += 1 }
      return Promise(error: CancellationError())
    }
    await #expect(throws: CancellationError.self) { try await result.value }
    #expect(calls.value == 1)
  }

  @Test("a constant delay waits exactly that long between attempts")
  func constantDelay() async throws {
    let clock = VirtualTimeScheduler()
    let queue = DispatchQueue(label: "retry.constant")
    let times = Kit.Locked<[Duration]>([])
    let result = Promise<Int>.retry(on: queue, attempts: 3, delay: .constant(.seconds(2)), scheduler: clock) {
      times.withValue { $0.append(clock.now) }
      return Promise(error: Kit.Failure(times.value.count))
    }
    for _ in 1...2 {
      try await clock.waitForPendingWork()
      clock.advance(by: .seconds(2) - .nanoseconds(1))
      #expect(clock.pendingCount == 1)
      clock.advance(by: .nanoseconds(1))
    }
    await #expect(throws: Kit.Failure(3)) { try await result.value }
    #expect(times.value == [.zero, .seconds(2), .seconds(4)])
  }

  @Test("exponential backoff without jitter waits exactly as computed, up to the cap")
  func exponentialBackoff() async throws {
    let clock = VirtualTimeScheduler()
    let queue = DispatchQueue(label: "retry.exponential")
    let times = Kit.Locked<[Duration]>([])
    let delay = RetryDelay.exponential(initial: .seconds(1), multiplier: 2, maximum: .seconds(5))
    let result = Promise<Int>.retry(on: queue, attempts: 6, delay: delay, scheduler: clock) {
      times.withValue { $0.append(clock.now) }
      return Promise(error: Kit.Failure(0))
    }
    for wait: Duration in [.seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5)] {
      try await clock.waitForPendingWork()
      #expect(clock.nextDeadline == clock.now + wait)
      clock.advance(by: wait)
    }
    await #expect(throws: Kit.Failure(0)) { try await result.value }
    #expect(times.value == [0, 1, 3, 7, 12, 17].map { Duration.seconds($0) })
  }

  @Test("full jitter draws from the given generator, reproducibly, within the cap")
  func fullJitterWithSeededGenerator() async throws {
    let delay = RetryDelay.exponential(
      initial: .milliseconds(100), multiplier: 3, maximum: .seconds(2), jitter: .full)
    var expectedGenerator = Kit.SeededGenerator(seed: 2024)
    let expected = (1...4).map { delay.duration(beforeRetry: $0, using: &expectedGenerator) }
    let clock = VirtualTimeScheduler()
    let queue = DispatchQueue(label: "retry.jitter")
    let times = Kit.Locked<[Duration]>([])
    let result = Promise<Int>.retry(
      on: queue, attempts: 5, delay: delay, using: Kit.SeededGenerator(seed: 2024), scheduler: clock
    ) {
      times.withValue { $0.append(clock.now) }
      return Promise(error: Kit.Failure(0))
    }
    for wait in expected {
      try await clock.waitForPendingWork()
      #expect(clock.nextDeadline == clock.now + wait)
      clock.advance(by: wait)
    }
    await #expect(throws: Kit.Failure(0)) { try await result.value }
    let recorded = times.value
    #expect(zip(recorded.dropFirst(), recorded).map { $0 - $1 } == expected)
  }

  @Test("RetryDelay computes none, constant and exponential waits")
  func retryDelayValues() {
    var generator = Kit.SeededGenerator(seed: 1)
    #expect(RetryDelay.none.duration(beforeRetry: 3, using: &generator) == .zero)
    #expect(RetryDelay.constant(.milliseconds(250)).duration(beforeRetry: 7) == .milliseconds(250))
    #expect(RetryDelay.constant(.seconds(-1)).duration(beforeRetry: 1) == .zero)
    let exponential = RetryDelay.exponential(
      initial: .milliseconds(100), multiplier: 1.5, maximum: .seconds(1))
    let waits = (1...8).map { exponential.duration(beforeRetry: $0, using: &generator) }
    #expect(
      waits == [100, 150, 225, 337.5, 506.25, 759.375, 1000, 1000].map { Duration.microseconds($0 * 1000) })
    let huge = RetryDelay.exponential(initial: .seconds(1), multiplier: 10, maximum: .seconds(60))
    #expect(huge.duration(beforeRetry: 400) == .seconds(60))
    #expect(RetryDelay.constant(.seconds(1)) == .constant(.seconds(1)))
    #expect(RetryDelay.exponential(initial: .seconds(1)).description.hasPrefix("exponential("))
  }

  @Test("full jitter stays within zero and the computed wait, capped", arguments: [UInt64(7), 99, 12345])
  func fullJitterBounds(seed: UInt64) {
    var generator = Kit.SeededGenerator(seed: seed)
    let cap = Duration.seconds(3)
    let delay = RetryDelay.exponential(initial: .milliseconds(50), multiplier: 2, maximum: cap, jitter: .full)
    let exact = RetryDelay.exponential(initial: .milliseconds(50), multiplier: 2, maximum: cap)
    var distinct = Set<Duration>()
    for retry in 1...12 {
      for _ in 0..<200 {
        let wait = delay.duration(beforeRetry: retry, using: &generator)
        #expect(wait >= .zero && wait <= exact.duration(beforeRetry: retry) && wait <= cap)
        distinct.insert(wait)
      }
    }
    #expect(distinct.count > 100)
  }

  @Test("cancelling the retry cancels the running attempt and starts no other")
  func cancellingCancelsRunningAttempt() async throws {
    let queue = DispatchQueue(label: "retry.cancel")
    let calls = Kit.Locked(0)
    let cancellations = Kit.Locked(0)
    let (started, startedResolver) = Promise<Void>.pending()
    let resolvers = Kit.Locked<[Promise<Int>.Resolver]>([])
    let result = Promise<Int>.retry(on: queue, attempts: 5) {
      calls.withValue { $0 += 1 }
      let (attempt, resolver) = Promise<Int>.pending()
      resolver.onCancel { cancellations.withValue { $0 += 1 } }
      resolvers.withValue { $0.append(resolver) }
      startedResolver.fulfill()
      return attempt
    }
    try await started.value
    await Kit.flush(queue)
    result.cancel()
    await #expect(throws: CancellationError.self) { try await result.value }
    #expect(cancellations.value == 1)
    await Kit.flush(queue)
    #expect(calls.value == 1)
  }

  @Test("cancelling during a wait cancels the timer and starts no other attempt")
  func cancellingDuringWait() async throws {
    let clock = VirtualTimeScheduler()
    let calls = Kit.Locked(0)
    let queue = DispatchQueue(label: "retry.cancel.wait")
    let result = Promise<Int>.retry(on: queue, attempts: 5, delay: .constant(.seconds(1)), scheduler: clock) {
      calls.withValue { $0 += 1 }
      return Promise(error: Kit.Failure(1))
    }
    try await clock.waitForPendingWork()
    result.cancel()
    #expect(clock.pendingCount == 0)
    clock.advance(by: .seconds(10))
    await Kit.flush(queue)
    #expect(calls.value == 1)
    await #expect(throws: CancellationError.self) { try await result.value }
  }

  @Test("cancelling spares an attempt that something else waits on")
  func cancellingSparesSharedAttempt() async throws {
    let queue = DispatchQueue(label: "retry.shared")
    let (shared, resolver) = Promise<Int>.pending()
    let cancellations = Kit.Locked(0)
    resolver.onCancel { cancellations.withValue { $0 += 1 } }
    let other = shared.map { $0 }
    let (started, startedResolver) = Promise<Void>.pending()
    let result = Promise<Int>.retry(on: queue, attempts: 3) {
      startedResolver.fulfill()
      return shared
    }
    try await started.value
    await Kit.flush(queue)
    result.cancel()
    #expect(cancellations.value == 0)
    #expect(shared.isPending)
    resolver.fulfill(8)
    #expect(try await other.value == 8)
  }

  @Test("nothing is retained after the retry settles")
  func nothingRetained() async throws {
    let clock = VirtualTimeScheduler()
    let queue = DispatchQueue(label: "retry.retain")
    var canary: Kit.Canary? = Kit.Canary()
    let weakCanary = Kit.Weak(canary)
    let calls = Kit.Locked(0)
    var result: Promise<Int>? = Promise<Int>.retry(
      on: queue, attempts: 3, delay: .constant(.seconds(1)), scheduler: clock,
      shouldRetry: { [canary] _ in canary != nil }
    ) { [canary] in
      _ = canary
      let call = calls.withValue { calls in
        calls += 1
        return calls
      }
      return call == 2 ? Promise(call) : Promise(error: Kit.Failure(call))
    }
    canary = nil
    let weakResult = Kit.Weak(result)
    try await clock.waitForPendingWork()
    clock.advance(by: .seconds(1))
    #expect(try await result!.value == 2)
    result = nil
    #expect(await Kit.eventually { weakCanary.isReleased && weakResult.isReleased })
  }

  @Test("attempts below one are a precondition failure", .tags(.childProcess))
  func attemptsMustBePositive() async {
    await #expect(processExitsWith: .failure) {
      _ = Promise<Int>.retry(attempts: 0) { Promise(1) }
    }
  }
}
