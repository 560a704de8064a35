import Dispatch
import Testing

@testable import Promises

/// Rule 1: a promise settles once; later fulfil/reject calls are ignored.
@Suite("Rule 1: a promise settles once", .timeLimit(.minutes(1)))
struct Rule1SettleOnceTests {
  @Test func aSecondFulfilIsIgnored() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    resolver.fulfill(1)
    resolver.fulfill(2)
    #expect(try await promise.value == 1)
    #expect(try promise.result?.get() == 1)
  }

  @Test func aRejectAfterAFulfilIsIgnored() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    resolver.fulfill(1)
    resolver.reject(CoreTestError.first)
    #expect(try await promise.value == 1)
    #expect(promise.isFulfilled)
    #expect(!promise.isRejected)
  }

  @Test func aFulfilAfterARejectIsIgnored() async {
    let (promise, resolver) = Promise<Int>.pending()
    resolver.reject(CoreTestError.first)
    resolver.fulfill(1)
    resolver.resolve(.success(2))
    await #expect(throws: CoreTestError.first) { try await promise.value }
    #expect(promise.isRejected)
  }

  @Test func aSecondRejectIsIgnoredAndTheFirstErrorIsKept() async {
    let (promise, resolver) = Promise<Int>.pending()
    resolver.reject(CoreTestError.first)
    resolver.reject(CoreTestError.second)
    await #expect(throws: CoreTestError.first) { try await promise.value }
  }

  @Test func copiesOfTheResolverShareOneOutcome() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let copy = resolver
    copy.fulfill(10)
    resolver.fulfill(20)
    #expect(try await promise.value == 10)
    #expect(!resolver.isPending)
    #expect(!copy.isPending)
  }

  @Test func aPromiseCreatedFulfilledCannotBeRejectedByCancel() async throws {
    let promise = Promise(5)
    promise.cancel()
    #expect(try await promise.value == 5)
  }

  @Test func callbacksSeeOnlyTheFirstOutcome() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let seen = Guarded<[Int]>([])
    let before = promise.map { value in seen.append(value) }
    resolver.fulfill(1)
    resolver.fulfill(2)
    let after = promise.map { value in seen.append(value) }
    resolver.fulfill(3)
    try await before.value
    try await after.value
    #expect(seen.value == [1, 1])
  }

  @Test func theBodyOfTheInitializerSettlesOnceEvenIfItThrowsAfterFulfilling() async throws {
    let promise = Promise<Int> { resolver in
      resolver.fulfill(1)
      throw CoreTestError.first
    }
    #expect(try await promise.value == 1)
  }

  @Test func theResultSettlesOnceUnderConcurrentResolvers() async throws {
    for _ in 0..<50 {
      let (promise, resolver) = Promise<Int>.pending()
      DispatchQueue.concurrentPerform(iterations: 8) { index in
        if index.isMultiple(of: 2) {
          resolver.fulfill(index)
        } else {
          resolver.reject(CoreTestError.numbered(index))
        }
      }
      let first = promise.result
      let awaited = await settledOutcome(of: promise)
      switch (first, awaited) {
      case (.success(let a)?, .success(let b)):
        #expect(a == b)
      case (.failure(let a)?, .failure(let b)):
        #expect(a as? CoreTestError == b as? CoreTestError)
      default:
        Issue.record("the outcome changed after settling: \(String(describing: first)) vs \(awaited)")
      }
    }
  }
}
