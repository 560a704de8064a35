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
    let promise: Promise<Int> = source.then { _ in box.value!.then { $0 } }
    box.value = promise
    resolver.fulfill(1)
    #expect(isChainingCycle(await boundedRejection(of: promise)))
  }

  @Test func anIndirectCycleThroughSeveralLinksRejects() async {
    let (source, resolver) = Promise<Int>.pending()
    let box = Guarded<Promise<Int>?>(nil)
    let promise: Promise<Int> = source.then { _ in
      box.value!.then { $0 + 1 }.recover { _ in 0 }.then { value in Promise(value) }.always {}
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
    let promise: Promise<Int> = source.then { _ in Promise.all([box.value!]).then { $0[0] } }
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
      for _ in 0..<20_000 { end = end.then { $0 } }
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
      return promise.then { value -> Int in
        probe.callbackRan()
        return value
      }
    }
    #expect(try await link.value == 1)
    #expect(probe.everyCallbackRanAfterReturn)
  }
}
