import Dispatch
import Testing

@testable import Promises

/// Rule 5: returning the promise itself from its own `then` (or any cycle of adoption) rejects
/// it with a `PromiseError`; it never hangs. Each test awaits with a bound, so a hang fails.
@Suite("Rule 5: chaining cycles reject instead of hanging", .timeLimit(.minutes(1)))
struct Rule5ChainingCycleTests {
  /// Awaits `promise`'s outcome, giving up after `seconds` (a hang is reported as `nil`).
  private func boundedRejection<Value>(of promise: Promise<Value>, seconds: Double = 10) async -> (
    any Error
  )? {
    let result = await withCheckedContinuation {
      (continuation: CheckedContinuation<Result<Value, any Error>?, Never>) in
      DispatchQueue(label: "tests.cycle.waiter").async {
        do {
          continuation.resume(returning: .success(try promise.wait(timeout: seconds)))
        } catch PromiseError.timedOut {
          continuation.resume(returning: nil)
        } catch {
          continuation.resume(returning: .failure(error))
        }
      }
    }
    switch result {
    case nil:
      Issue.record("the promise did not settle within \(seconds) s: a chaining cycle hangs")
      return nil
    case .success(let value)?:
      Issue.record("expected a rejection, got \(value)")
      return nil
    case .failure(let error)?:
      return error
    }
  }

  private func isChainingCycle(_ error: (any Error)?) -> Bool {
    if case .chainingCycle? = error as? PromiseError { return true }
    return false
  }

  @Test func returningThePromiseItselfFromThenRejectsWithChainingCycle() async {
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let promise: Promise<Int> = source.then { _ in box.value! }
    box.value = promise
    resolver.fulfill(1)
    let error = await boundedRejection(of: promise)
    #expect(isChainingCycle(error))
  }

  @Test func theCycleErrorNamesWhereTheCyclingPromiseWasCreated() async {
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let line = #line + 1
    let promise: Promise<Int> = source.then { _ in box.value! }
    box.value = promise
    resolver.fulfill(1)
    let error = await boundedRejection(of: promise)
    #expect(error as? PromiseError == .chainingCycle(createdAt: CreationSite(fileID: #fileID, line: line)))
  }

  @Test func returningThePromiseItselfFromRecoverRejectsWithChainingCycle() async {
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let promise: Promise<Int> = source.recover { _ in box.value! }
    box.value = promise
    resolver.reject(CoreTestError.first)
    #expect(isChainingCycle(await boundedRejection(of: promise)))
  }

  @Test func anIndirectCycleThroughAThenOfThePromiseRejects() async {
    // q = p.then { _ in q.then { $0 } }
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let promise: Promise<Int> = source.then { _ in box.value!.map { $0 } }
    box.value = promise
    resolver.fulfill(1)
    #expect(isChainingCycle(await boundedRejection(of: promise)))
  }

  @Test func anIndirectCycleThroughSeveralLinksRejects() async {
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let promise: Promise<Int> = source.then { _ in
      box.value!.map { $0 + 1 }.recover { _ in 0 }.then { value in Promise(value) }.always {}
    }
    box.value = promise
    resolver.fulfill(1)
    #expect(isChainingCycle(await boundedRejection(of: promise)))
  }

  @Test func twoPromisesAdoptingEachOtherReject() async {
    // a adopts b, then b's body returns a: the cycle is closed by the second adoption.
    let (source, resolver) = Promise<Int>.pending()
    let boxA = Guarded<Promise<Int>?>(nil)
    let boxB = Guarded<Promise<Int>?>(nil)
    let queue = DispatchQueue(label: "tests.mutual")
    let a: Promise<Int> = source.then(on: queue) { _ in boxB.value! }
    let b: Promise<Int> = source.then(on: queue) { _ in boxA.value! }
    boxA.value = a
    boxB.value = b
    resolver.fulfill(1)
    #expect(isChainingCycle(await boundedRejection(of: b)))
    #expect(isChainingCycle(await boundedRejection(of: a)))
  }

  @Test func anAdoptionCycleThroughAllRejects() async {
    // q = p.then { _ in Promise.all([q]).then { $0[0] } }: the cycle passes through an
    // aggregate. Nothing else can ever settle q, so it must not hang.
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let promise: Promise<Int> = source.then { _ in Promise.all([box.value!]).map { $0[0] } }
    box.value = promise
    resolver.fulfill(1)
    let error = await boundedRejection(of: promise, seconds: 5)
    #expect(error is PromiseError)
  }

  @Test func anAdoptionCycleLongerThanTenThousandLinksRejects() async {
    // The body builds a 20,000-link chain on the promise itself and returns its end.
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let promise: Promise<Int> = source.then { _ in
      var end = box.value!
      for _ in 0..<20_000 { end = end.map { $0 } }
      return end
    }
    box.value = promise
    resolver.fulfill(1)
    let error = await boundedRejection(of: promise, seconds: 5)
    #expect(error is PromiseError)
  }

  @Test func returningAnotherSettledPromiseIsNotACycle() async throws {
    let shared = Promise(3)
    let first = shared.then { _ in shared }
    let second = first.then { _ in shared }
    #expect(try await second.value == 3)
  }

  @Test func returningTheSourcePromiseIsNotACycle() async throws {
    let (source, resolver) = Promise<Int>.pending()
    let promise = source.then { _ in source }
    resolver.fulfill(4)
    #expect(try await promise.value == 4)
  }

  @Test func theInitializerBodyRunsSynchronouslyButItsOutcomeIsObservedAsynchronously() async throws {
    let ranInside = Guarded(false)
    let probe = ReturnProbe()
    let link = probe.register {
      let promise = Promise<Int> { resolver in
        ranInside.value = true
        resolver.fulfill(1)
      }
      #expect(ranInside.value, "the body runs before the initializer returns")
      return promise.map { value -> Int in
        probe.callbackRan()
        return value
      }
    }
    #expect(try await link.value == 1)
    #expect(probe.everyCallbackRanAfterReturn)
  }
}

/// The cycle check costs about twice the shorter of its two walks (upstream from the adopted
/// promise, downstream from the adopter), so a chain in which each link adopts the one before
/// it is built in linear time, not quadratic.
@Suite("Rule 5: the cycle check stays linear", .timeLimit(.minutes(1)))
struct ChainingCycleCostTests {
  /// Builds `count` links, each adopting the link before it, on a pending root; returns once
  /// every link has adopted its predecessor.
  private func adoptionChain(
    _ count: Int, queue: DispatchQueue
  ) async -> (root: Promise<Int>.Resolver, last: Promise<Int>) {
    let (root, resolver) = Promise<Int>.pending()
    let trigger = Promise(())
    var last = root
    for _ in 0..<count {
      let previous = last
      last = trigger.then(on: queue) { previous }
    }
    await drainQueue(queue)
    return (resolver, last)
  }

  @Test(arguments: [10_000, 100_000])
  func aChainOfLinksEachAdoptingTheOneBeforeSettlesAndEachAdoptionIsChecked(count: Int) async throws {
    let queue = DispatchQueue(label: "tests.adoption-chain")
    let (root, last) = await adoptionChain(count, queue: queue)
    // One more adoption at the end of the chain checks in one round, whatever its length: the
    // adopter has nothing downstream yet. (Walking upstream alone would visit every link.)
    let (adopter, _) = Promise<Int>.pending()
    let check = _PromiseNode.adoptionClosesCycle(adopter: adopter, inner: last)
    #expect(!check.closesCycle)
    #expect(check.rounds == 1)
    root.fulfill(7)
    #expect(try await last.value == 7)
  }

  @Test func aCycleIsFoundFromWhicheverEndIsShorter() async {
    // q's downstream is 1,000 links long, and so is the walk upstream from their end.
    let (source, resolver) = Promise<Int>.pending()
    var end = source
    for _ in 0..<1_000 { end = end.map { $0 } }
    let up = _PromiseNode.adoptionClosesCycle(adopter: source, inner: end)
    #expect(up.closesCycle)
    #expect(up.rounds <= 1_001)
    resolver.fulfill(0)
    _ = await settledOutcome(of: end)
  }

  @Test func aCycleThroughARaceAndATimeoutRejects() async {
    // The downstream walk cannot see through `race` and `timeout` (their inputs do not keep
    // the result alive); the upstream walk finds the cycle.
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let promise: Promise<Int> = source.then { _ in
      Promise.race([box.value!.map { $0 }.timeout(.seconds(60))])
    }
    box.value = promise
    resolver.fulfill(1)
    let error = await rejectionError(of: promise)
    #expect(error as? PromiseError != nil)
  }

  @Test func twoPromisesAdoptingEachOtherOnTwoThreadsAtOnceBothSettle() async {
    for _ in 0..<200 {
      let (source, resolver) = Promise<Int>.pending()
      let boxA = Guarded<Promise<Int>?>(nil)
      let boxB = Guarded<Promise<Int>?>(nil)
      let a: Promise<Int> = source.then(on: DispatchQueue(label: "tests.mutual.a")) { _ in boxB.value! }
      let b: Promise<Int> = source.then(on: DispatchQueue(label: "tests.mutual.b")) { _ in boxA.value! }
      boxA.value = a
      boxB.value = b
      resolver.fulfill(1)
      let errors = [await rejectionError(of: a), await rejectionError(of: b)]
      #expect(errors.allSatisfy { $0 is PromiseError })
      #expect(
        errors.contains { if case .chainingCycle? = $0 as? PromiseError { true } else { false } })
    }
  }
}
