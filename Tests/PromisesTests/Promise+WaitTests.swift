import Dispatch
import Foundation
import Testing

@testable import Promises

/// `wait(timeout:)` and rule 8: it never hangs silently. It throws `PromiseError.timedOut` when
/// the time is up, and `PromiseError.waitWouldDeadlock` when called from a queue the promise
/// still needs in order to settle.
///
/// `wait` blocks its thread, so these tests call it on Dispatch queues (never on the
/// cooperative pool, except for promises that are already settled) and with short timeouts: a
/// missed deadlock shows up as `timedOut` after two seconds, not as a hang.
@Suite("Promise.wait(timeout:)", .timeLimit(.minutes(1)))
struct PromiseWaitTests {
  /// Runs `body` inside a promise callback on `queue` (so a drain is active on it).
  private func inCallback<T: Sendable>(
    on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T
  ) async -> Result<T, any Error> {
    let link = Promise(()).map(on: queue) { _ in Result { try body() } }
    do {
      return try await link.value
    } catch {
      return .failure(error)
    }
  }

  /// Runs `body` in a plain block on `queue` (no promise machinery around it).
  private func inBlock<T: Sendable>(
    on queue: DispatchQueue, _ body: @escaping @Sendable () throws -> T
  ) async -> Result<T, any Error> {
    await withCheckedContinuation { continuation in
      queue.async { continuation.resume(returning: Result { try body() }) }
    }
  }

  private func expectWouldDeadlock<T>(
    _ result: Result<T, any Error>, queue: DispatchQueue, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    guard case .failure(let error) = result else {
      Issue.record(
        "wait returned instead of failing: it should have detected the deadlock",
        sourceLocation: sourceLocation)
      return
    }
    guard case .waitWouldDeadlock(let label, _)? = error as? PromiseError else {
      Issue.record("expected waitWouldDeadlock, got \(error)", sourceLocation: sourceLocation)
      return
    }
    #expect(label == queue.label, sourceLocation: sourceLocation)
  }

  // MARK: Values and errors

  @Test func waitReturnsTheValueOfAFulfilledPromise() throws {
    #expect(try Promise(3).wait(timeout: 1) == 3)
    #expect(try Promise(4).wait(timeout: .seconds(1)) == 4)
  }

  @Test func waitThrowsTheErrorOfARejectedPromise() {
    let error = IdentifiedError()
    #expect {
      try Promise<Int>(error: error).wait(timeout: 1)
    } throws: { isSame($0, as: error) }
  }

  @Test func waitReturnsOnceAPromiseIsFulfilledOnAnotherThread() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let chain = promise.map(on: DispatchQueue(label: "tests.wait.chain")) { $0 * 2 }
    DispatchQueue.global().async { resolver.fulfill(21) }
    let waited = await inBlock(on: DispatchQueue(label: "tests.wait.waiter")) { try chain.wait(timeout: 30) }
    #expect(try waited.get() == 42)
  }

  @Test func waitBlocksUntilAPendingPromiseSettles() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let waiter = DispatchQueue(label: "tests.wait.blocking")
    let result = Guarded<Result<Int, any Error>?>(nil)
    let done = DispatchGroup()
    done.enter()
    waiter.async {
      result.value = Result { try promise.wait(timeout: 30) }
      done.leave()
    }
    // Fulfil once the waiter is blocked in `wait` (it has registered its wake-up node).
    await yieldUntil { callbacksWaiting(on: promise) == 1 }
    #expect(result.value == nil)
    resolver.fulfill(7)
    await awaitGroup(done)
    #expect(try result.value?.get() == 7)
  }

  @Test func aWaiterWakesUpWhileTheCallbackThatFulfilledThePromiseIsStillRunning() async throws {
    // A callback fulfils `promise`, then waits for the thread blocked in `promise.wait` to
    // react. The waiter must wake up when the promise settles, not when the callback returns.
    let (promise, resolver) = Promise<Int>.pending()
    let reacted = DispatchSemaphore(value: 0)
    let waiterDone = DispatchGroup()
    waiterDone.enter()
    DispatchQueue(label: "tests.wait.woken").async {
      _ = try? promise.wait(timeout: 50)
      reacted.signal()
      waiterDone.leave()
    }
    await yieldUntil { callbacksWaiting(on: promise) == 1 }
    let callback = Promise(()).map(on: DispatchQueue(label: "tests.wait.fulfilling")) { _ -> Bool in
      resolver.fulfill(1)
      return reacted.wait(timeout: .now() + 30) == .success
    }
    #expect(try await callback.value, "the waiter was not woken while the fulfilling callback ran")
    await awaitGroup(waiterDone)
  }

  // MARK: Timeouts

  @Test func waitThrowsTimedOutWhenTheTimeIsUpAndLeavesThePromisePending() throws {
    let line = #line + 1
    let (promise, resolver) = Promise<Int>.pending()
    let clock = ContinuousClock()
    let start = clock.now
    #expect(
      throws: PromiseError.timedOut(
        after: .milliseconds(50), createdAt: CreationSite(fileID: #fileID, line: line))
    ) {
      try promise.wait(timeout: 0.05)
    }
    print("wait(timeout: 0.05) returned after \(clock.now - start)")
    #expect(promise.isPending)
    resolver.fulfill(1)
    #expect(try promise.wait(timeout: 10) == 1)
  }

  @Test func waitWithADurationThrowsTimedOutWithThatDuration() {
    let (promise, resolver) = Promise<Int>.pending()
    #expect {
      try promise.wait(timeout: .milliseconds(20))
    } throws: { error in
      guard case .timedOut(let after, let site)? = error as? PromiseError else { return false }
      return after == .milliseconds(20) && site == promise.creationSite
    }
    _ = resolver
  }

  @Test func aZeroOrNegativeTimeoutChecksOnce() throws {
    let (promise, resolver) = Promise<Int>.pending()
    #expect(throws: PromiseError.self) { try promise.wait(timeout: 0) }
    #expect(throws: PromiseError.self) { try promise.wait(timeout: -1) }
    resolver.fulfill(2)
    #expect(try promise.wait(timeout: 0) == 2)
  }

  @Test(.tags(.childProcess)) func anInfiniteTimeoutWaitsWithoutCrashing() async {
    // `wait(timeout: .infinity)` reads as "no time limit"; it must not trap when converting the
    // seconds to nanoseconds. Run in a child process: a trap must not take the suite down.
    await #expect(processExitsWith: .success) {
      let value = try? Promise(1).wait(timeout: .infinity)
      if value != 1 { exit(1) }
    }
  }

  @Test(.tags(.childProcess)) func aTimeoutBeyondTheRangeOfNanosecondsWaitsWithoutCrashing() async {
    await #expect(processExitsWith: .success) {
      let value = try? Promise(1).wait(timeout: 1e12)
      if value != 1 { exit(1) }
    }
  }

  @Test func aHugeDurationTimeoutWaitsWithoutCrashing() throws {
    #expect(try Promise(1).wait(timeout: .seconds(Int64.max)) == 1)
    let (promise, resolver) = Promise<Int>.pending()
    DispatchQueue.global().async { resolver.fulfill(5) }
    #expect(try promise.wait(timeout: .seconds(Int64.max / 2)) == 5)
  }

  // MARK: Deadlock detection

  @Test func waitInACallbackOnASerialQueueForAChainThatNeedsItThrows() async throws {
    let queue = DispatchQueue(label: "tests.wait.serial")
    let (source, resolver) = Promise<Int>.pending()
    let needsQueue = source.map(on: queue) { $0 + 1 }
    let line = #line + 1
    let downstream = needsQueue.map(on: DispatchQueue(label: "tests.wait.other")) { $0 }
    let result = await inCallback(on: queue) { try downstream.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    if case .failure(PromiseError.waitWouldDeadlock(_, let site)) = result {
      #expect(site == CreationSite(fileID: #fileID, line: line), "the error names the promise waited on")
    }
    resolver.fulfill(1)
    #expect(try await downstream.value == 2)
  }

  @Test func waitInACallbackOnTheDefaultQueueForAChainThatNeedsItThrows() async throws {
    let (source, resolver) = Promise<Int>.pending()
    let needsDefault = source.map { $0 + 1 }
    let result = await inCallback(on: .promises) { try needsDefault.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: .promises)
    resolver.fulfill(1)
    #expect(try await needsDefault.value == 2)
  }

  @Test func waitInACallbackOnTheMainQueueForAChainThatNeedsItThrows() async throws {
    // The test runner services the main queue, so callbacks on `.main` run.
    let (source, resolver) = Promise<Int>.pending()
    let needsMain = source.map(on: .main) { $0 + 1 }
    let result = await inCallback(on: .main) { try needsMain.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: .main)
    resolver.fulfill(1)
    #expect(try await needsMain.value == 2)
  }

  @Test func waitInAPlainBlockOnASerialQueueForAChainThatNeedsItThrows() async throws {
    let queue = DispatchQueue(label: "tests.wait.block")
    let (source, resolver) = Promise<Int>.pending()
    let needsQueue = source.map(on: queue) { $0 + 1 }
    let result = await inBlock(on: queue) { try needsQueue.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await needsQueue.value == 2)
  }

  @Test func waitForAnAdoptedPromiseThatNeedsTheQueueThrows() async throws {
    let queue = DispatchQueue(label: "tests.wait.adopted")
    let (source, resolver) = Promise<Int>.pending()
    let needsQueue = source.map(on: queue) { $0 + 1 }
    let adopter = Promise(()).then { _ in needsQueue }
    await yieldUntil { callbacksWaiting(on: needsQueue) == 1 }
    let result = await inCallback(on: queue) { try adopter.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await adopter.value == 2)
  }

  @Test func waitForAnAggregateWhoseInputNeedsTheQueueThrows() async throws {
    // Promise.all over a link that needs `queue`: the aggregate cannot settle while `queue` is
    // blocked, and the library can see that through the aggregate's inputs.
    let queue = DispatchQueue(label: "tests.wait.all")
    let (source, resolver) = Promise<Int>.pending()
    let needsQueue = source.map(on: queue) { $0 + 1 }
    let aggregate = Promise.all([needsQueue, Promise(0)])
    let result = await inCallback(on: queue) { try aggregate.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await aggregate.value == [2, 0])
  }

  @Test func waitForTheTailOfALongChainWhoseFirstLinkNeedsTheQueueThrows() async throws {
    // The walk follows 5,000 pending links (past the first 64 and with no visited set) to the
    // one link that needs `queue`.
    let queue = DispatchQueue(label: "tests.wait.long-chain")
    let other = DispatchQueue(label: "tests.wait.long-chain.other")
    let (source, resolver) = Promise<Int>.pending()
    var tail = source.map(on: queue) { $0 + 1 }
    for _ in 0..<5_000 { tail = tail.map(on: other) { $0 + 1 } }
    let waited = tail
    let result = await inBlock(on: queue) { try waited.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(0)
    #expect(try await waited.value == 5_001)
  }

  @Test func aWaitShorterThanTheDeadlockCheckDelayStillReportsTheDeadlock() async throws {
    // 100 µs is less than the 10 ms `wait` blocks before it looks for a deadlock: the
    // check still runs before the wait reports a timeout.
    let queue = DispatchQueue(label: "tests.wait.short")
    let (source, resolver) = Promise<Int>.pending()
    let needsQueue = source.map(on: queue) { $0 + 1 }
    let result = await inBlock(on: queue) { try needsQueue.wait(timeout: .microseconds(100)) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await needsQueue.value == 2)
  }

  // The combinators that run work of their own on a queue (a timer, the next attempt, the next
  // factory) need that queue to settle, as a `then(on:)` link does.

  @Test func waitOnTheQueueOfPromiseAfterThrows() async throws {
    let queue = DispatchQueue(label: "tests.wait.after")
    let timed = Promise.after(.seconds(30), on: queue)
    let result = await inBlock(on: queue) { try timed.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    timed.cancel()
  }

  @Test func waitOnTheQueueOfATimeoutThrows() async throws {
    let queue = DispatchQueue(label: "tests.wait.timeout")
    let (source, resolver) = Promise<Int>.pending()
    let limited = source.timeout(.seconds(30), on: queue)
    let result = await inBlock(on: queue) { try limited.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await limited.value == 1)
  }

  @Test func waitOnTheQueueOfADelayThrows() async throws {
    let queue = DispatchQueue(label: "tests.wait.delay")
    let (source, resolver) = Promise<Int>.pending()
    let delayed = source.delay(.milliseconds(1), on: queue)
    let result = await inBlock(on: queue) { try delayed.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await delayed.value == 1)
  }

  @Test func waitOnTheQueueOfARetryThrows() async throws {
    let queue = DispatchQueue(label: "tests.wait.retry")
    let (attempt, resolver) = Promise<Int>.pending()
    let retried = Promise<Int>.retry(on: queue, attempts: 2) { attempt }
    let result = await inBlock(on: queue) { try retried.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await retried.value == 1)
  }

  @Test func waitOnTheQueueOfAFanOutThrows() async throws {
    let queue = DispatchQueue(label: "tests.wait.fan-out")
    let (first, resolver) = Promise<Int>.pending()
    let all = Promise<Int>.all(on: queue, maxConcurrent: 1, [{ first }, { Promise(2) }])
    let result = await inBlock(on: queue) { try all.wait(timeout: 2) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await all.value == [1, 2])
  }

  @Test func waitOnTheQueueOfATimeoutWithAnInfiniteLimitThrowsPromptly() async throws {
    let queue = DispatchQueue(label: "tests.wait.timeout-infinite")
    let (source, resolver) = Promise<Int>.pending()
    let limited = source.timeout(.seconds(30), on: queue)
    let result = await inBlock(on: queue) { try limited.wait(timeout: .infinity) }
    expectWouldDeadlock(result, queue: queue)
    resolver.fulfill(1)
    #expect(try await limited.value == 1)
  }

  @Test func waitOnAnotherQueueForACombinatorWorks() async throws {
    let queue = DispatchQueue(label: "tests.wait.combinator-queue")
    let (source, resolver) = Promise<Int>.pending()
    let limited = source.timeout(.seconds(30), on: queue)
    DispatchQueue.global().async { resolver.fulfill(4) }
    let result = await inBlock(on: DispatchQueue(label: "tests.wait.combinator-waiter")) {
      try limited.wait(timeout: 30)
    }
    #expect(try result.get() == 4)
  }

  @Test func waitFromADifferentQueueWorks() async throws {
    let chainQueue = DispatchQueue(label: "tests.wait.chain-queue")
    let waiterQueue = DispatchQueue(label: "tests.wait.waiter-queue")
    let (source, resolver) = Promise<Int>.pending()
    let chain = source.map(on: chainQueue) { $0 + 1 }.map(on: chainQueue) { $0 * 10 }
    let waited = Promise(()).map(on: waiterQueue) { _ in Result { try chain.wait(timeout: 30) } }
    await yieldUntil { callbacksWaiting(on: chain) == 1 }
    resolver.fulfill(1)
    #expect(try await waited.value.get() == 20)
  }

  @Test func waitOnTheNeededQueueForAnAlreadySettledPromiseReturnsItsValue() async throws {
    let queue = DispatchQueue(label: "tests.wait.settled")
    let settled = Promise(1).map(on: queue) { $0 + 1 }
    #expect(try await settled.value == 2)
    let result = await inCallback(on: queue) { try settled.wait(timeout: 2) }
    #expect(try result.get() == 2)
  }

  @Test func waitReadsARejectionAsHandled() async throws {
    let error = IdentifiedError()
    let promise = Promise<Int>(error: error)
    #expect(throws: IdentifiedError.self) { try promise.wait(timeout: 1) }
    #expect(promise.flags.contains(.observed))
  }

  @Test func aTimedOutWaitTakesBackWhatItRegistered() async throws {
    // Polling a promise that stays pending must not pile up waiters in it. The polling blocks
    // for 0.6 s at least, on a queue of its own rather than a thread of the cooperative pool.
    let (promise, resolver) = Promise<Int>.pending()
    let timedOut = await inBlock(on: DispatchQueue(label: "tests.wait.polling")) {
      (0..<300).filter { _ in
        do {
          _ = try promise.wait(timeout: .milliseconds(2))
          return false
        } catch {
          return error is PromiseError
        }
      }.count
    }
    #expect(try timedOut.get() == 300)
    #expect(callbacksWaiting(on: promise) == 0)
    #expect(promise.debugDescription.contains("pending, 0 callbacks waiting"))
    resolver.fulfill(3)
    #expect(try promise.wait(timeout: 10) == 3)
  }

  @Test func aWaitThatReportsADeadlockTakesBackWhatItRegistered() async throws {
    let queue = DispatchQueue(label: "tests.wait.deadlock-unregisters")
    let (source, resolver) = Promise<Int>.pending()
    let chained = source.map(on: queue) { $0 }
    let result = await inBlock(on: queue) { try chained.wait(timeout: 5) }
    #expect(throws: PromiseError.self) { try result.get() }
    #expect(callbacksWaiting(on: chained) == 0)
    resolver.fulfill(1)
    #expect(try await chained.value == 1)
  }
}
