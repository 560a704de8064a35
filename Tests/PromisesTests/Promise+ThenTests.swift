import Dispatch
import Testing

@testable import Promises

/// `then`, `recover`, `catch`, `always`, `whenSettled`, `validate` and `asVoid`.
@Suite("then, recover, catch, always, whenSettled, validate", .timeLimit(.minutes(1)))
struct PromiseThenTests {
  // MARK: then

  @Test func thenTransformsTheValue() async throws {
    #expect(try await Promise(20).map { $0 + 1 }.map { "\($0 * 2)" }.value == "42")
  }

  /// `Promise<T>.Value` names `T`: a user's code that spells it keeps compiling (it was made
  /// unavailable while `then`'s misuse stub declared an associated type `Value` of its own
  /// through an unavailable conformance; the API-break check reported it).
  @Test func promiseValueNamesTheValueType() {
    let value: Promise<Int>.Value = 3
    func valueType<P: _PromiseConvertible>(of _: P) -> P.Value.Type { P.Value.self }
    #expect(value == 3)
    #expect(valueType(of: Promise("x")) == String.self)
  }

  @Test func thenAdoptsAFulfilledPromise() async throws {
    #expect(try await Promise(1).then { Promise($0 + 1) }.value == 2)
  }

  @Test func thenAdoptsAPromiseFulfilledLater() async throws {
    let (inner, resolver) = Promise<String>.pending()
    let chain = Promise(1).then { _ in inner }
    DispatchQueue.global().async { resolver.fulfill("later") }
    #expect(try await chain.value == "later")
  }

  @Test func aMultiStatementClosureReturningAPromiseIsAdopted() async throws {
    let chain = Promise(2).then { value in
      let doubled = value * 2
      return Promise(doubled)
    }
    let adopted: Promise<Int> = chain
    #expect(try await adopted.value == 4)
  }

  @Test func thenOnAPendingPromiseRunsAfterFulfilment() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let chain = promise.map { $0 * 3 }
    #expect(chain.isPending)
    resolver.fulfill(5)
    #expect(try await chain.value == 15)
    #expect(chain.isFulfilled)
  }

  @Test func thenCanProduceVoid() async throws {
    let ran = Guarded(false)
    let done: Promise<Void> = Promise(1).map { _ in ran.value = true }
    try await done.value
    #expect(ran.value)
  }

  // MARK: recover

  @Test func recoverReplacesARejectionWithAValue() async throws {
    #expect(try await Promise<Int>(error: CoreTestError.first).recover { _ in 9 }.value == 9)
  }

  @Test func recoverReplacesARejectionWithAPromise() async throws {
    let (fallback, resolver) = Promise<Int>.pending()
    let chain = Promise<Int>(error: CoreTestError.first).recover { _ in fallback }
    resolver.fulfill(11)
    #expect(try await chain.value == 11)
  }

  @Test func recoverSeesTheError() async throws {
    let chain = Promise<Int>(error: CoreTestError.numbered(3)).recover { error -> Int in
      guard case .numbered(let number)? = error as? CoreTestError else { throw error }
      return number
    }
    #expect(try await chain.value == 3)
  }

  @Test func recoverPassesAValueThrough() async throws {
    #expect(try await Promise(4).recover { _ in Promise(0) }.value == 4)
  }

  // MARK: catch

  @Test func catchObservesTheErrorAndPassesTheRejectionOn() async {
    let seen = Guarded<CoreTestError?>(nil)
    let chain = Promise<Int>(error: CoreTestError.second).catch { seen.value = $0 as? CoreTestError }
    await #expect(throws: CoreTestError.second) { try await chain.value }
    #expect(seen.value == .second)
  }

  @Test func catchPassesAValueOnWithoutRunning() async throws {
    let ran = Guarded(false)
    let chain = Promise(6).catch { _ in ran.value = true }
    #expect(try await chain.value == 6)
    #expect(!ran.value)
  }

  @Test func catchMarksTheRejectionAsHandled() async {
    let (promise, resolver) = Promise<Int>.pending()
    let caught = promise.catch { _ in }
    resolver.reject(CoreTestError.first)
    _ = await settledOutcome(of: caught)
    #expect(promise.flags.contains(.observed))
    #expect(caught.flags.contains(.observed), "the promise returned by catch is never reported")
  }

  // MARK: always and whenSettled

  @Test(arguments: [true, false])
  func alwaysRunsOnEitherOutcomeAndPassesItOn(fulfil: Bool) async throws {
    let ran = Guarded(0)
    let source = fulfil ? Promise(1) : Promise<Int>(error: CoreTestError.first)
    let chain = source.always { ran.increment() }
    let result = await settledOutcome(of: chain)
    #expect(ran.value == 1)
    if fulfil {
      #expect(try result.get() == 1)
    } else {
      #expect(throws: CoreTestError.first) { try result.get() }
    }
  }

  @Test(arguments: [true, false])
  func whenSettledSeesTheOutcomeAndPassesItOn(fulfil: Bool) async throws {
    let seen = Guarded<Result<Int, CoreTestError>?>(nil)
    let source = fulfil ? Promise(1) : Promise<Int>(error: CoreTestError.first)
    let chain = source.whenSettled { result in
      seen.value = result.mapError { $0 as! CoreTestError }
    }
    let result = await settledOutcome(of: chain)
    if fulfil {
      #expect(seen.value == .success(1))
      #expect(try result.get() == 1)
    } else {
      #expect(seen.value == .failure(.first))
      #expect(throws: CoreTestError.first) { try result.get() }
    }
    // Only a rejection needs marking (it is then not reported as unhandled); a callback
    // registered on a fulfilled promise takes the lock-free path and writes no flag.
    if !fulfil { #expect(source.flags.contains(.observed)) }
  }

  @Test func alwaysRunsAfterTheWholeChainBeforeIt() async throws {
    let order = Guarded<[Int]>([])
    let chain = Promise(0)
      .map { value -> Int in
        order.append(1)
        return value
      }
      .always { order.append(2) }
    _ = try await chain.value
    #expect(order.value == [1, 2])
  }

  // MARK: validate

  @Test func validatePassesAnAcceptedValue() async throws {
    #expect(try await Promise(8).validate { $0 > 5 }.value == 8)
  }

  @Test func validateRejectsWithValidationFailedNamingTheCallSite() async {
    let line = #line + 1
    let chain = Promise(2).validate { $0 > 5 }
    await #expect(throws: PromiseError.validationFailed(createdAt: CreationSite(fileID: #fileID, line: line)))
    {
      try await chain.value
    }
  }

  @Test func aThrowingValidateRejectsWithWhatItThrew() async {
    let error = IdentifiedError()
    let chain = Promise(2).validate { _ in throw error }
    #expect(isSame(await rejectionError(of: chain), as: error))
  }

  @Test func validateSkipsARejection() async {
    let ran = Guarded(false)
    let chain = Promise<Int>(error: CoreTestError.first).validate { _ in
      ran.value = true
      return true
    }
    await #expect(throws: CoreTestError.first) { try await chain.value }
    #expect(!ran.value)
  }

  // MARK: asVoid

  @Test func asVoidDropsTheValueAndKeepsTheRejection() async throws {
    try await Promise(1).asVoid().value
    await #expect(throws: CoreTestError.first) {
      try await Promise<Int>(error: CoreTestError.first).asVoid().value
    }
  }

  // MARK: state accessors

  @Test func stateAccessorsFollowTheOutcome() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    #expect(promise.isPending && !promise.isFulfilled && !promise.isRejected)
    #expect(promise.result == nil)
    resolver.fulfill(1)
    #expect(!promise.isPending && promise.isFulfilled && !promise.isRejected)
    #expect(try promise.result?.get() == 1)

    let rejected = Promise<Int>(error: CoreTestError.first)
    #expect(!rejected.isPending && !rejected.isFulfilled && rejected.isRejected)
    #expect(throws: CoreTestError.first) { try rejected.result?.get() }
  }
}
