import Dispatch
import Testing

@testable import Promises

/// Many threads settling, registering and cancelling at once. The threads really overlap: they
/// are `Thread`s released together from a barrier (`runOnThreads`) or `concurrentPerform`
/// workers. Each test is sized to finish well under two seconds in a debug build.
@Suite("Concurrency stress", .timeLimit(.minutes(1)))
struct StressTests {
  @Test func manyThreadsFulfillingOnePromiseOneWinsAndEveryCallbackSeesIt() async throws {
    let queue = DispatchQueue(label: "tests.stress.fulfil", attributes: .concurrent)
    for _ in 0..<100 {
      let (promise, resolver) = Promise<Int>.pending()
      let before = (0..<4).map { _ in promise.map(on: queue) { $0 } }
      let during = Guarded<[Promise<Int>]>([])
      let finished = await runOnThreads(4) { thread in
        during.withLock { $0.append(promise.map(on: queue) { $0 }) }
        resolver.fulfill(thread)
        during.withLock { $0.append(promise.map(on: queue) { $0 }) }
      }
      #expect(finished)
      let winner = try await promise.value
      #expect((0..<4).contains(winner))
      for link in before + during.value {
        #expect(try await link.value == winner)
      }
    }
  }

  @Test func waitersGivingUpWhileOthersRegisterLeaveEveryOtherCallbackInOrder() async throws {
    // The callbacks of a pending promise are a ring of nodes (`PromiseState`): timed-out waits
    // take their nodes out of it, from any position, while other threads append to it.
    let queue = DispatchQueue(label: "tests.stress.ring")
    for _ in 0..<10 {
      let (promise, resolver) = Promise<Int>.pending()
      let order = Guarded<[[Int]]>(Array(repeating: [], count: 2))
      let links = Guarded<[Promise<Void>]>([])
      let finished = await runOnThreads(4) { thread in
        if thread < 2 {
          for index in 0..<50 {
            let link = promise.map(on: queue) { _ in order.withLock { $0[thread].append(index) } }
            links.withLock { $0.append(link) }
          }
        } else {
          for _ in 0..<25 { _ = try? promise.wait(timeout: .microseconds(100)) }
        }
      }
      #expect(finished)
      #expect(callbacksWaiting(on: promise) == 100, "every waiter took its node back")
      resolver.fulfill(1)
      for link in links.value { try await link.value }
      #expect(order.value == [Array(0..<50), Array(0..<50)], "each thread's callbacks in order")
    }
  }

  @Test func fulfilAndRejectRacingSettleOnce() async throws {
    for round in 0..<100 {
      let (promise, resolver) = Promise<Int>.pending()
      let observers = (0..<3).map { _ in promise.map { $0 } }
      let finished = await runOnThreads(4) { thread in
        switch thread {
        case 0: resolver.fulfill(round)
        case 1: resolver.reject(CoreTestError.numbered(round))
        case 2: promise.cancel()
        default: resolver.resolve(.success(-round))
        }
      }
      #expect(finished)
      let first = await settledOutcome(of: promise)
      for observer in observers {
        let seen = await settledOutcome(of: observer)
        switch (first, seen) {
        case (.success(let a), .success(let b)): #expect(a == b)
        case (.failure(let a), .failure(let b)): #expect(String(describing: a) == String(describing: b))
        default: Issue.record("an observer saw a different outcome: \(first) vs \(seen)")
        }
      }
    }
  }

  @Test func cancelRacingFulfilRunsTheHandlerOnlyIfCancelWon() async throws {
    for round in 0..<200 {
      let (promise, resolver) = Promise<Int>.pending()
      let handlerRuns = Guarded(0)
      resolver.onCancel { handlerRuns.increment() }
      let finished = await runOnThreads(2) { thread in
        if thread == 0 {
          resolver.fulfill(round)
        } else {
          promise.cancel()
        }
      }
      #expect(finished)
      #expect(handlerRuns.value == (promise.isCancelled ? 1 : 0))
    }
  }

  @Test func cancellingALinkRacingWithItsSourceRunsTheBodyAtMostOnceAndLetsGoOnce() async {
    // One thread fulfils the source while another cancels the link. Whichever wins, the body
    // runs at most once, and a link that ends fulfilled ran its body exactly once. The link
    // fires without a lock; a cancellation lets go of its closure and source only while the
    // source is pending, else the firing does (Docs/Design.md, I3): either way both are let go
    // of once, with no double release (AddressSanitizer) and no race (ThreadSanitizer) in CI.
    let queue = DispatchQueue(label: "tests.stress.cancel-link")
    for round in 0..<200 {
      let runs = Guarded(0)
      @inline(never) func make() -> (Promise<Int>, Promise<Int>.Resolver, WeakObserver<LifetimeToken>) {
        let (source, resolver) = Promise<Int>.pending()
        let (link, capture) = countingLink(on: source, queue: queue, runs: runs)
        return (link, resolver, capture)
      }
      let (link, resolver, capture) = make()
      let finished = await runOnThreads(2) { thread in
        if thread == 0 {
          resolver.fulfill(round)
        } else {
          link.cancel()
        }
      }
      #expect(finished)
      let outcome = await settledOutcome(of: link)
      await drainQueue(queue)
      #expect(runs.value <= 1)
      if case .success(let value) = outcome {
        #expect(value == round)
        #expect(runs.value == 1)
      } else {
        #expect(link.isCancelled)
      }
      #expect(capture.isNil, "round \(round): the link's closure is still alive")
      #expect(link.walkStep().upstream == nil, "round \(round): the settled link still holds its source")
    }
  }

  @Test func cancellingAnAdoptingLinkWhileItsPromisesSettleLetsGoOfTheInnerPromise() async {
    // Three threads: one fulfils the source (the link's body returns `inner`, and the link
    // starts adopting it), one cancels the link, one fulfils `inner`. Whatever the order, the
    // link ends holding neither the source nor `inner`.
    let queue = DispatchQueue(label: "tests.stress.cancel-adopting")
    for round in 0..<200 {
      let (source, resolver) = Promise<Int>.pending()
      let (inner, innerResolver) = Promise<Int>.pending()
      let link = source.then(on: queue) { _ in inner }
      let finished = await runOnThreads(3) { thread in
        switch thread {
        case 0: resolver.fulfill(0)
        case 1: link.cancel()
        default: innerResolver.fulfill(round)
        }
      }
      #expect(finished)
      let outcome = await settledOutcome(of: link)
      await drainQueue(queue)
      if case .success(let value) = outcome {
        #expect(value == round)
      } else {
        #expect(link.isCancelled)
      }
      #expect(link.walkStep().upstream == nil, "round \(round): the settled link still holds a promise")
    }
  }

  @Test(arguments: CallbackQueueKind.allCases)
  func manyThreadsRegisteringWhileAnotherSettlesLoseNoCallback(kind: CallbackQueueKind) async {
    let queue = kind.makeQueue()
    let threads = 4
    let perThread = 2_000
    let (promise, resolver) = Promise<Int>.pending()
    let runs = Guarded([Int](repeating: 0, count: threads * perThread))
    let group = DispatchGroup()
    let finished = await runOnThreads(threads + 1) { thread in
      if thread == threads {
        resolver.fulfill(1)
        return
      }
      for step in 0..<perThread {
        let slot = thread * perThread + step
        group.enter()
        _ = promise.map(on: queue) { _ in
          runs.withLock { $0[slot] += 1 }
          group.leave()
        }
      }
    }
    #expect(finished)
    await awaitGroup(group)
    let counts = runs.value
    #expect(counts.allSatisfy { $0 == 1 }, "every callback runs exactly once")
    #expect(counts.reduce(0, +) == threads * perThread)
  }

  @Test func allOverTenThousandPromisesFulfilledFromFourThreads() async throws {
    let count = 10_000
    let pairs = (0..<count).map { _ in Promise<Int>.pending() }
    let all = Promise.all(pairs.map(\.promise))
    let finished = await runOnThreads(4) { thread in
      for index in stride(from: thread, to: count, by: 4) {
        pairs[index].resolver.fulfill(index)
      }
    }
    #expect(finished)
    #expect(try await all.value == Array(0..<count))
  }

  @Test func allCreatedWhileItsInputsAreBeingFulfilled() async throws {
    let count = 10_000
    let pairs = (0..<count).map { _ in Promise<Int>.pending() }
    let aggregate = Guarded<Promise<[Int]>?>(nil)
    let finished = await runOnThreads(5) { thread in
      if thread == 4 {
        aggregate.value = Promise.all(pairs.map(\.promise))
        return
      }
      for index in stride(from: thread, to: count, by: 4) {
        pairs[index].resolver.fulfill(index * 2)
      }
    }
    #expect(finished)
    let all = try #require(aggregate.value)
    #expect(try await all.value == (0..<count).map { $0 * 2 })
  }

  @Test func chainsOnManyThreadsSettleIndependently() async throws {
    let results = Guarded<[Promise<Int>]>([])
    let finished = await runOnThreads(4) { thread in
      let queue = DispatchQueue(label: "tests.stress.chain.\(thread)")
      var link = Promise(thread)
      for _ in 0..<2_000 { link = link.map(on: queue) { $0 + 1 } }
      results.withLock { $0.append(link.map { $0 * 10 + thread }) }
    }
    #expect(finished)
    let values = try await Promise.all(results.value).value.sorted()
    #expect(values == (0..<4).map { ($0 + 2_000) * 10 + $0 }.sorted())
  }

  @Test func concurrentPerformRegistrationAndCancellation() async {
    // Half the workers register links and cancel them at once, half register and keep them;
    // the source then settles. Kept links see the value, cancelled ones are cancelled.
    let (source, resolver) = Promise<Int>.pending()
    let keeper = source.map { $0 }
    let kept = Guarded<[Promise<Int>]>([])
    let cancelled = Guarded<[Promise<Int>]>([])
    DispatchQueue.concurrentPerform(iterations: 1_000) { index in
      let link = source.map { $0 + index }
      if index.isMultiple(of: 2) {
        link.cancel()
        cancelled.withLock { $0.append(link) }
      } else {
        kept.withLock { $0.append(link) }
      }
    }
    #expect(source.isPending, "another observer keeps the source alive")
    resolver.fulfill(1)
    for link in kept.value {
      #expect(await settledOutcome(of: link).isSuccess)
    }
    for link in cancelled.value {
      #expect(await rejectionError(of: link) is CancellationError)
    }
    _ = await settledOutcome(of: keeper)
  }

  @Test func mutualAdoptionRacingOnTwoQueuesRejectsInsteadOfHanging() async {
    // `a` adopts `b` and `b` adopts `a`, from bodies running at the same time on two queues
    // (they meet at a rendezvous just before returning). Whichever way the race goes, the
    // cycle must be rejected (rule 5), never leave both pending forever.
    let first = DispatchQueue(label: "tests.stress.mutual.1")
    let second = DispatchQueue(label: "tests.stress.mutual.2")
    for round in 0..<200 {
      let (source, resolver) = Promise<Int>.pending()
      let boxA = Guarded<Promise<Int>?>(nil)
      let boxB = Guarded<Promise<Int>?>(nil)
      let arrived = Guarded(0)
      let rendezvous: @Sendable () -> Void = {
        arrived.increment()
        var spins = 0
        while arrived.value < 2 && spins < 1_000_000 { spins += 1 }
      }
      let a: Promise<Int> = source.then(on: first) { _ in
        rendezvous()
        return boxB.value!
      }
      let b: Promise<Int> = source.then(on: second) { _ in
        rendezvous()
        return boxA.value!
      }
      boxA.value = a
      boxB.value = b
      resolver.fulfill(1)
      let settled = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        DispatchQueue(label: "tests.stress.mutual.waiter").async {
          let settledA = (try? a.wait(timeout: 2)) != nil || !a.isPending
          let settledB = (try? b.wait(timeout: 2)) != nil || !b.isPending
          continuation.resume(returning: settledA && settledB)
        }
      }
      if !settled {
        Issue.record("round \(round): \(a) and \(b) adopted each other and hang")
        return
      }
      #expect(a.isRejected && b.isRejected)
    }
  }

  @Test func manyWaitersOnDispatchThreadsAllWakeUp() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let results = Guarded<[Int]>([])
    let group = DispatchGroup()
    for index in 0..<8 {
      group.enter()
      // A serial queue of its own per waiter: blocking them never starves a shared pool.
      DispatchQueue(label: "tests.stress.waiter.\(index)").async {
        if let value = try? promise.wait(timeout: 30) { results.append(value) }
        group.leave()
      }
    }
    await yieldUntil { callbacksWaiting(on: promise) == 8 }
    resolver.fulfill(6)
    await awaitGroup(group)
    #expect(results.value == Array(repeating: 6, count: 8))
  }
}

extension Result {
  fileprivate var isSuccess: Bool {
    if case .success = self { return true }
    return false
  }
}
