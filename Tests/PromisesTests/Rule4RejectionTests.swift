import Dispatch
import Testing

@testable import Promises

/// Rule 4: a `then` whose closure throws, or returns a rejected promise, rejects the returned
/// promise with that error; a rejection skips `then` and reaches the next `recover`/`catch`
/// unchanged.
@Suite("Rule 4: rejections propagate unchanged", .timeLimit(.minutes(1)))
struct Rule4RejectionTests {
  @Test func aRejectionSkipsEveryThenAndReachesRecoverAsTheSameInstance() async throws {
    let error = IdentifiedError()
    let skipped = Guarded(0)
    let received = Guarded<(any Error)?>(nil)
    let chain = Promise<Int>(error: error)
      .map { value -> Int in
        skipped.increment()
        return value
      }
      .then { value -> Promise<String> in
        skipped.increment()
        return Promise("\(value)")
      }
      .validate { _ in
        skipped.increment()
        return true
      }
      .recover { error -> String in
        received.value = error
        return "recovered"
      }
    #expect(try await chain.value == "recovered")
    #expect(skipped.value == 0)
    #expect(isSame(received.value, as: error))
  }

  @Test func aRejectionReachesCatchUnchangedAndPassesOn() async {
    let error = IdentifiedError()
    let caught = Guarded<(any Error)?>(nil)
    let chain = Promise<Int>(error: error)
      .map { $0 + 1 }
      .catch { caught.value = $0 }
    let final = await rejectionError(of: chain)
    #expect(isSame(caught.value, as: error))
    #expect(isSame(final, as: error))
  }

  @Test func aRejectionPassesThroughAlwaysAndWhenSettledUnchanged() async {
    let error = IdentifiedError()
    let observed = Guarded<(any Error)?>(nil)
    let chain = Promise<Int>(error: error)
      .always {}
      .whenSettled { result in
        if case .failure(let error) = result { observed.value = error }
      }
      .map { $0 }
    #expect(isSame(await rejectionError(of: chain), as: error))
    #expect(isSame(observed.value, as: error))
  }

  @Test func aThrowingThenRejectsWithWhatItThrew() async {
    let error = IdentifiedError()
    let chain = Promise(1).map { _ -> Int in throw error }
    #expect(isSame(await rejectionError(of: chain), as: error))
  }

  @Test func aThrowingPromiseReturningThenRejectsWithWhatItThrew() async {
    let error = IdentifiedError()
    let chain = Promise(1).then { _ -> Promise<Int> in throw error }
    #expect(isSame(await rejectionError(of: chain), as: error))
  }

  @Test func aThenReturningARejectedPromiseRejects() async {
    let error = IdentifiedError()
    let chain = Promise(1).then { _ in Promise<Int>(error: error) }
    #expect(isSame(await rejectionError(of: chain), as: error))
  }

  @Test func aThenReturningAPromiseRejectedLaterRejects() async {
    let error = IdentifiedError()
    let (inner, resolver) = Promise<Int>.pending()
    let chain = Promise(1).then { _ in inner }
    DispatchQueue.global().async { resolver.reject(error) }
    #expect(isSame(await rejectionError(of: chain), as: error))
  }

  @Test func aThrowingRecoverRejectsWithTheNewError() async {
    let original = IdentifiedError("original")
    let replacement = IdentifiedError("replacement")
    let chain = Promise<Int>(error: original).recover { _ -> Int in throw replacement }
    #expect(isSame(await rejectionError(of: chain), as: replacement))
  }

  @Test func aRecoverReturningARejectedPromiseRejects() async {
    let replacement = IdentifiedError("replacement")
    let chain = Promise<Int>(error: CoreTestError.first).recover { _ in Promise<Int>(error: replacement) }
    #expect(isSame(await rejectionError(of: chain), as: replacement))
  }

  @Test func recoverSkipsAFulfilledValue() async throws {
    let ran = Guarded(false)
    let chain = Promise(7).recover { _ -> Int in
      ran.value = true
      return 0
    }
    #expect(try await chain.value == 7)
    #expect(!ran.value)
  }

  @Test func aRecoveredChainContinuesWithThen() async throws {
    let chain = Promise<Int>(error: CoreTestError.first)
      .recover { _ in 1 }
      .map { $0 + 1 }
    #expect(try await chain.value == 2)
  }

  @Test func aRejectionInTheMiddleSkipsTheRestOfTheChain() async {
    let error = IdentifiedError()
    let ranAfter = Guarded(false)
    let chain = Promise(1)
      .map { $0 + 1 }
      .map { _ -> Int in throw error }
      .map { value -> Int in
        ranAfter.value = true
        return value
      }
      .then { _ in Promise(0) }
    #expect(isSame(await rejectionError(of: chain), as: error))
    #expect(!ranAfter.value)
  }

  @Test func aRejectionReachesARecoverOnAnotherQueue() async throws {
    let checker = QueueChecker()
    let queue = DispatchQueue(label: "tests.recover-queue")
    let error = IdentifiedError()
    let received = Guarded<(any Error)?>(nil)
    let chain = Promise(1)
      .map { _ -> Int in throw error }
      .recover(on: queue) { error -> Int in
        checker.verify(queue)
        received.value = error
        return 5
      }
    #expect(try await chain.value == 5)
    #expect(isSame(received.value, as: error))
    checker.expectAllOnQueue(count: 1)
  }
}
