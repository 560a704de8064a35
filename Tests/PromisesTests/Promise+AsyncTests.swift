import Dispatch
import Testing

@testable import Promises

/// `try await promise.value` and `Promise { try await … }`.
@Suite("async value and async initializer", .timeLimit(.minutes(1)))
struct PromiseAsyncTests {
  @Test func valueOfASettledPromiseReturnsAtOnce() async throws {
    #expect(try await Promise(1).value == 1)
  }

  @Test func valueSuspendsUntilThePromiseIsFulfilled() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let awaiting = Task { try await promise.value }
    // The task is suspended in `value` once its continuation is registered on the promise.
    await yieldUntil { callbacksWaiting(on: promise) == 1 }
    #expect(promise.isPending)
    resolver.fulfill(12)
    #expect(try await awaiting.value == 12)
  }

  @Test func valueThrowsTheRejectionError() async {
    let error = IdentifiedError()
    let (promise, resolver) = Promise<Int>.pending()
    let awaiting = Task { try await promise.value }
    await yieldUntil { callbacksWaiting(on: promise) == 1 }
    resolver.reject(error)
    let result = await awaiting.result
    guard case .failure(let thrown) = result else {
      Issue.record("expected a rejection")
      return
    }
    #expect(isSame(thrown, as: error))
  }

  @Test func anAwaiterResumesWhileTheCallbackThatFulfilledThePromiseIsStillRunning() async throws {
    // A callback fulfils `promise`, then waits for the task suspended in `promise.value` to
    // react. The task must resume when the promise settles, not when the callback returns.
    let (promise, resolver) = Promise<Int>.pending()
    let reacted = DispatchSemaphore(value: 0)
    let awaiting = Task {
      let value = try await promise.value
      reacted.signal()
      return value
    }
    await yieldUntil { callbacksWaiting(on: promise) == 1 }
    let callback = Promise(()).map(on: DispatchQueue(label: "tests.async.fulfilling")) { _ -> Bool in
      resolver.fulfill(1)
      return reacted.wait(timeout: .now() + 30) == .success
    }
    #expect(try await callback.value, "the awaiting task did not resume while the fulfilling callback ran")
    #expect(try await awaiting.value == 1)
  }

  @Test func manySuspendedAwaitersDoNotBlockTheCooperativePool() async throws {
    // More awaiters than the pool has threads: if `value` blocked a thread, the pool would be
    // exhausted and this test could not go on to fulfil the promises.
    let count = 64
    let pairs = (0..<count).map { _ in Promise<Int>.pending() }
    let sum = try await withThrowingTaskGroup(of: Int.self) { group in
      for pair in pairs {
        group.addTask { try await pair.promise.value }
      }
      await yieldUntil { pairs.allSatisfy { callbacksWaiting(on: $0.promise) == 1 } }
      for (index, pair) in pairs.enumerated() { pair.resolver.fulfill(index) }
      return try await group.reduce(0, +)
    }
    #expect(sum == (0..<count).reduce(0, +))
  }

  @Test func manyTasksCanAwaitOnePromise() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let results = try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<20 {
        group.addTask { try await promise.map { $0 }.value }
      }
      resolver.fulfill(3)
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(results == Array(repeating: 3, count: 20))
  }

  @Test func valueMarksARejectionAsHandled() async {
    let promise = Promise<Int>(error: CoreTestError.first)
    _ = await settledOutcome(of: promise)
    #expect(promise.flags.contains(.observed))
  }

  // MARK: Promise { try await … }

  @Test func anAsyncBodyFulfilsThePromise() async throws {
    let promise = Promise<Int> {
      await Task.yield()
      return 40 + 2
    }
    #expect(try await promise.value == 42)
  }

  @Test func anAsyncBodyThatThrowsRejectsThePromise() async {
    let error = IdentifiedError()
    let promise = Promise<Int> { () async throws -> Int in
      await Task.yield()
      throw error
    }
    #expect(isSame(await rejectionError(of: promise), as: error))
  }

  @Test func anAsyncBodyCanAwaitOtherPromises() async throws {
    let (input, resolver) = Promise<Int>.pending()
    let promise = Promise<Int> { try await input.value * 2 }
    let chained = promise.map { $0 + 1 }
    resolver.fulfill(5)
    #expect(try await chained.value == 11)
  }

  @Test func anAsyncPromiseIsObservedAsynchronouslyLikeAnyOther() async throws {
    let probe = ReturnProbe()
    let link = probe.register {
      Promise<Int> { 1 }.map { value -> Int in
        probe.callbackRan()
        return value
      }
    }
    #expect(try await link.value == 1)
    #expect(probe.everyCallbackRanAfterReturn)
  }
}
