import Dispatch
import Testing

@testable import Promises

/// Rule 2: a callback never runs before the call that registered it has returned, runs exactly
/// once, and runs on the queue it was given (or the default queue).
@Suite("Rule 2: callbacks are asynchronous, run once, on their queue", .timeLimit(.minutes(1)))
struct Rule2CallbackDeliveryTests {
  // MARK: Never synchronous

  @Test(arguments: CallbackQueueKind.allCases)
  func aCallbackOnAFulfilledPromiseRunsAfterThenReturns(kind: CallbackQueueKind) async throws {
    let queue = kind.makeQueue()
    let probe = ReturnProbe()
    let link = probe.register { Promise(1).map(on: queue) { _ in probe.callbackRan() } }
    try await link.value
    #expect(probe.everyCallbackRanAfterReturn)
  }

  @Test func aCallbackOnARejectedPromiseRunsAfterRecoverReturns() async throws {
    let probe = ReturnProbe()
    let link = probe.register {
      Promise<Int>(error: CoreTestError.first).recover { _ in
        probe.callbackRan()
        return 0
      }
    }
    #expect(try await link.value == 0)
    #expect(probe.everyCallbackRanAfterReturn)
  }

  @Test func everyKindOfCallbackOnASettledPromiseRunsAfterItsCallReturns() async throws {
    let probe = ReturnProbe()
    let fulfilled = Promise(1)
    let rejected = Promise<Int>(error: CoreTestError.first)
    let links: [Promise<Int>] = probe.register {
      [
        fulfilled.map { value -> Int in
          probe.callbackRan()
          return value
        },
        fulfilled.then { value -> Promise<Int> in
          probe.callbackRan()
          return Promise(value)
        },
        rejected.recover { _ -> Promise<Int> in
          probe.callbackRan()
          return Promise(0)
        },
        rejected.catch { _ in probe.callbackRan() }.recover { _ in 0 },
        fulfilled.always { probe.callbackRan() },
        fulfilled.whenSettled { _ in probe.callbackRan() },
        fulfilled.validate { _ in
          probe.callbackRan()
          return true
        },
      ]
    }
    _ = try await Promise.all(links).value
    #expect(probe.callbackCount == 7)
    #expect(probe.everyCallbackRanAfterReturn)
  }

  @Test(arguments: CallbackQueueKind.allCases)
  func registeringFromACallbackOnTheSameQueueStillDispatches(kind: CallbackQueueKind) async throws {
    // The registering code runs inside a drain on `queue`; the new callback must not join that
    // drain and run before the registering callback has returned.
    let queue = kind.makeQueue()
    let settled = Promise(2)
    let probe = ReturnProbe()
    let inner = Guarded<Promise<Void>?>(nil)
    let outer = Promise(1).map(on: queue) { _ in
      inner.value = probe.register { settled.map(on: queue) { _ in probe.callbackRan() } }
    }
    try await outer.value
    try await #require(inner.value).value
    #expect(probe.everyCallbackRanAfterReturn)
  }

  @Test func registeringAcrossQueuesRunsTheCallbackAfterTheCallReturns() async throws {
    let registering = DispatchQueue(label: "tests.registering")
    let target = DispatchQueue(label: "tests.target")
    let probe = ReturnProbe()
    let inner = Guarded<Promise<Void>?>(nil)
    let outer = Promise(1).map(on: registering) { value in
      inner.value = probe.register { Promise(value).map(on: target) { _ in probe.callbackRan() } }
    }
    try await outer.value
    try await #require(inner.value).value
    #expect(probe.everyCallbackRanAfterReturn)
  }

  @Test func aPromiseFulfilledInsideItsInitializerIsStillObservedAsynchronously() async throws {
    let probe = ReturnProbe()
    let link = probe.register {
      Promise<Int> { resolver in resolver.fulfill(1) }.map { value -> Int in
        probe.callbackRan()
        return value + 1
      }
    }
    #expect(try await link.value == 2)
    #expect(probe.everyCallbackRanAfterReturn)
  }

  @Test func fulfillingDoesNotRunCallbacksInsideTheFulfilCall() async throws {
    // Callbacks registered before settlement are dispatched to their queue by `fulfill`, not
    // run inside it.
    let (promise, resolver) = Promise<Int>.pending()
    let probe = ReturnProbe()
    let link = promise.map(on: DispatchQueue(label: "tests.fulfil")) { _ in probe.callbackRan() }
    probe.register { resolver.fulfill(1) }
    try await link.value
    #expect(probe.everyCallbackRanAfterReturn)
  }

  @Test func fulfillingFromACallbackDoesNotRunCallbacksOfTheSameQueueInsideTheFulfilCall()
    async throws
  {
    let queue = DispatchQueue(label: "tests.fulfil-on-queue")
    let (promise, resolver) = Promise<Int>.pending()
    let probe = ReturnProbe()
    let link = promise.map(on: queue) { _ in probe.callbackRan() }
    let trigger = Promise(()).map(on: queue) { _ in probe.register { resolver.fulfill(1) } }
    try await trigger.value
    try await link.value
    #expect(probe.everyCallbackRanAfterReturn)
  }

  // MARK: Exactly once

  @Test func aThenCallbackRunsExactlyOnce() async throws {
    try await confirmation(expectedCount: 1) { ran in
      let (promise, resolver) = Promise<Int>.pending()
      let link = promise.map { _ in ran() }
      resolver.fulfill(1)
      resolver.fulfill(2)
      resolver.reject(CoreTestError.first)
      try await link.value
      // Anything else the promise scheduled on the default queue has run by now.
      await drainQueue(.promises)
    }
  }

  @Test func eachCallbackKindRunsExactlyOnce() async throws {
    try await confirmation(expectedCount: 6) { ran in
      let (promise, resolver) = Promise<Int>.pending()
      let (failing, failingResolver) = Promise<Int>.pending()
      let links: [Promise<Int>] = [
        promise.map { value -> Int in
          ran()
          return value
        },
        promise.always { ran() },
        promise.whenSettled { _ in ran() },
        failing.catch { _ in ran() }.recover { _ in 0 },
        failing.recover { _ -> Int in
          ran()
          return 0
        },
        failing.always { ran() }.recover { _ in 0 },
      ]
      resolver.fulfill(1)
      failingResolver.reject(CoreTestError.first)
      failingResolver.fulfill(2)
      _ = try await Promise.all(links).value
      await drainQueue(.promises)
    }
  }

  @Test func callbacksThatMustNotRunDoNot() async throws {
    try await confirmation(expectedCount: 0) { ran in
      let fulfilled = Promise(1)
      let rejected = Promise<Int>(error: CoreTestError.first)
      let links: [Promise<Int>] = [
        fulfilled.recover { _ -> Int in
          ran()
          return 0
        },
        fulfilled.catch { _ in ran() },
        rejected.map { value -> Int in
          ran()
          return value
        }.recover { _ in 0 },
      ]
      _ = try await Promise.all(links).value
      await drainQueue(.promises)
    }
  }

  // MARK: On the given queue

  @Test(arguments: CallbackQueueKind.allCases)
  func everyCallbackRunsOnTheQueueItWasGiven(kind: CallbackQueueKind) async throws {
    let checker = QueueChecker()
    let queue = kind.makeQueue()
    let (promise, resolver) = Promise<Int>.pending()
    let chain =
      promise
      .map(on: queue) { value -> Int in
        checker.verify(queue)
        return value + 1
      }
      .then(on: queue) { value -> Promise<Int> in
        checker.verify(queue)
        return Promise(error: CoreTestError.numbered(value))
      }
      .catch(on: queue) { _ in checker.verify(queue) }
      .recover(on: queue) { _ -> Int in
        checker.verify(queue)
        return 10
      }
      .always(on: queue) { checker.verify(queue) }
      .whenSettled(on: queue) { _ in checker.verify(queue) }
      .validate(on: queue) { _ in
        checker.verify(queue)
        return true
      }
    resolver.fulfill(1)
    #expect(try await chain.value == 10)
    checker.expectAllOnQueue(count: 7)
  }

  @Test func callbacksWithoutAQueueRunOnTheDefaultQueue() async throws {
    let checker = QueueChecker()
    let defaultQueue = DispatchQueue.promises
    let chain = Promise(1)
      .map { value -> Int in
        checker.verify(defaultQueue)
        return value
      }
      .then { value -> Promise<Int> in
        checker.verify(defaultQueue)
        return Promise(error: CoreTestError.numbered(value))
      }
      .catch { _ in checker.verify(defaultQueue) }
      .recover { _ -> Int in
        checker.verify(defaultQueue)
        return 3
      }
      .always { checker.verify(defaultQueue) }
    #expect(try await chain.value == 3)
    checker.expectAllOnQueue(count: 5)
  }

  @Test func theDefaultQueueIsASerialQueueThatNeedsNoMainRunLoop() async throws {
    // Callbacks on the default queue never overlap: a counter without a lock stays consistent
    // only if they run one at a time. This test thread never runs the main queue.
    let inFlight = Guarded(0)
    let overlapped = Guarded(false)
    let links = (0..<200).map { index in
      Promise(index).map { value -> Int in
        if inFlight.withLock({ count -> Int in
          count += 1
          return count
        }) > 1 {
          overlapped.value = true
        }
        inFlight.withLock { $0 -= 1 }
        return value
      }
    }
    #expect(try await Promise.all(links).value == Array(0..<200))
    #expect(!overlapped.value)
  }

  @Test func aCallbackSwitchesQueuesHopByHop() async throws {
    let checker = QueueChecker()
    let first = DispatchQueue(label: "tests.hop.1")
    let second = DispatchQueue(label: "tests.hop.2", attributes: .concurrent)
    let chain = Promise(0)
      .map(on: first) { value -> Int in
        checker.verify(first)
        return value + 1
      }
      .map(on: second) { value -> Int in
        checker.verify(second)
        return value + 1
      }
      .map(on: first) { value -> Int in
        checker.verify(first)
        return value + 1
      }
    #expect(try await chain.value == 3)
    checker.expectAllOnQueue(count: 3)
  }

  @Test func callbacksOnTheMainQueueRunOnTheMainThread() async throws {
    let checker = QueueChecker()
    // The test runner's main thread services the main queue (async main runs dispatchMain).
    let link = Promise(1).map(on: .main) { value -> Int in
      checker.verify(.main)
      return value + 1
    }
    #expect(try await link.value == 2)
    checker.expectAllOnQueue(count: 1)
  }
}
