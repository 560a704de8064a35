import Dispatch
import Testing

@testable import Promises

/// `Promise` itself: values of every size, alignment and layout survive storage (in place or
/// boxed), every way of reading them, and are released with the promise.
@Suite("Promise values of every layout", .timeLimit(.minutes(1)))
struct PromiseTests {
  struct Small: Sendable, Equatable {
    var a: UInt8
    var b: UInt16
  }

  struct Large: Sendable, Equatable {
    var numbers: (Int, Int, Int, Int, Int) = (1, 2, 3, 4, 5)
    var text = "large"

    static func == (lhs: Large, rhs: Large) -> Bool {
      lhs.numbers == rhs.numbers && lhs.text == rhs.text
    }
  }

  enum Payload: Sendable, Equatable {
    case none
    case number(Int)
    case pair(String, [Int])
  }

  /// Reads `value` back through every path: settled init, pending + fulfil, `then`, adoption,
  /// `result`, `wait`, `value` and `all`.
  private func expectRoundTrip<T: Sendable & Equatable>(
    _ value: T, sourceLocation: SourceLocation = #_sourceLocation
  ) async throws {
    let settled = Promise(value)
    #expect(try await settled.value == value, sourceLocation: sourceLocation)
    #expect(try settled.result?.get() == value, sourceLocation: sourceLocation)
    #expect(try settled.wait(timeout: 10) == value, sourceLocation: sourceLocation)

    let (pending, resolver) = Promise<T>.pending()
    let passedOn = pending.map { $0 }
    let adopted = pending.then { Promise($0) }
    let always = pending.always {}
    let all = Promise.all([pending, settled])
    resolver.fulfill(value)
    #expect(try await pending.value == value, sourceLocation: sourceLocation)
    #expect(try await passedOn.value == value, sourceLocation: sourceLocation)
    #expect(try await adopted.value == value, sourceLocation: sourceLocation)
    #expect(try await always.value == value, sourceLocation: sourceLocation)
    #expect(try await all.value == [value, value], sourceLocation: sourceLocation)
  }

  @Test func valuesSmallerThanTwoWordsRoundTrip() async throws {
    try await expectRoundTrip(true)
    try await expectRoundTrip(UInt8(200))
    try await expectRoundTrip(Small(a: 1, b: 2))
    try await expectRoundTrip(Int.min)
    try await expectRoundTrip(3.25)
    try await expectRoundTrip("a string long enough to live on the heap, not in place")
    try await expectRoundTrip("short")
    try await expectRoundTrip([1, 2, 3])
    try await expectRoundTrip(Int?.none)
    try await expectRoundTrip(Int?.some(4))
    try await expectRoundTrip(CoreTestError.numbered(3))
  }

  @Test func valuesLargerThanTwoWordsRoundTrip() async throws {
    try await expectRoundTrip(Large())
    try await expectRoundTrip(Payload.pair("pair", [1, 2]))
    try await expectRoundTrip(Payload.none)
    try await expectRoundTrip(String?.some("optional"))
    try await expectRoundTrip([String: Int]())
    try await expectRoundTrip(Set([1, 2, 3]))
  }

  @Test func overAlignedValuesRoundTrip() async throws {
    try await expectRoundTrip(UInt128.max - 1)
    try await expectRoundTrip(SIMD4<Float>(1, 2, 3, 4))
  }

  @Test func voidAndEmptyValuesWork() async throws {
    try await Promise(()).value
    let (promise, resolver) = Promise<Void>.pending()
    let chained = promise.map { _ in 1 }
    resolver.fulfill()
    #expect(try await chained.value == 1)
  }

  @Test func existentialValuesRoundTrip() async throws {
    let promise = Promise<any Sendable>(Large())
    let value = try await promise.map { $0 }.value
    #expect(value as? Large == Large())
  }

  @Test func tuplesFromHeterogeneousAllMixInlineAndBoxedValues() async throws {
    let all = Promise.all(Promise(Large()), Promise(UInt8(1)), Promise("text"), Promise(UInt128(7)))
    let (large, byte, text, wide) = try await all.value
    #expect(large == Large())
    #expect(byte == 1)
    #expect(text == "text")
    #expect(wide == 7)
  }

  // MARK: Making promises

  @Test func aThrowingInitializerBodyRejectsThePromise() async {
    let error = IdentifiedError()
    let promise = Promise<Int> { _ in throw error }
    #expect(isSame(await rejectionError(of: promise), as: error))
  }

  @Test func resolveSettlesWithAResult() async throws {
    let (fulfilled, fulfilResolver) = Promise<Int>.pending()
    fulfilResolver.resolve(.success(3))
    #expect(try await fulfilled.value == 3)
    let (rejected, rejectResolver) = Promise<Int>.pending()
    rejectResolver.resolve(.failure(CoreTestError.second))
    await #expect(throws: CoreTestError.second) { try await rejected.value }
  }

  @Test func aResolverReportsWhetherItsPromiseIsPending() {
    let (_, resolver) = Promise<Int>.pending()
    #expect(resolver.isPending)
    #expect(!resolver.isCancelled)
    resolver.fulfill(1)
    #expect(!resolver.isPending)
  }

  // MARK: Lifetime of stored values

  struct LargeHolder: Sendable {
    let token: LifetimeToken
    let padding: (Int, Int, Int) = (0, 0, 0)
  }

  struct SmallHolder: Sendable {
    let token: LifetimeToken
  }

  struct WeakHolder: Sendable {
    weak var token: LifetimeToken?
  }

  @Test func aValueStoredInPlaceIsReleasedWithThePromise() {
    @inline(never) func make() -> (Guarded<Promise<SmallHolder>?>, WeakObserver<LifetimeToken>) {
      let token = LifetimeToken()
      return (Guarded(Promise(SmallHolder(token: token))), WeakObserver(token))
    }
    let (box, token) = make()
    #expect(!token.isNil)
    #expect(box.value?.result != nil)
    box.value = nil
    #expect(token.isNil)
  }

  @Test func aBoxedValueIsReleasedWithThePromise() {
    @inline(never) func make() -> (Guarded<Promise<LargeHolder>?>, WeakObserver<LifetimeToken>) {
      let token = LifetimeToken()
      let (promise, resolver) = Promise<LargeHolder>.pending()
      resolver.fulfill(LargeHolder(token: token))
      return (Guarded(promise), WeakObserver(token))
    }
    let (box, token) = make()
    #expect(!token.isNil)
    box.value = nil
    #expect(token.isNil)
  }

  @Test func aValueWithAWeakReferenceSurvivesStorage() async throws {
    let token = LifetimeToken()
    let promise = Promise(WeakHolder(token: token))
    let read = try await promise.map { $0 }.value
    #expect(read.token === token)
  }

  @Test func readingAValueOnManyThreadsAtOnceIsSafe() async throws {
    // Observers on several queues copy the same stored value at the same time.
    let (promise, resolver) = Promise<Large>.pending()
    let queues = (0..<4).map { DispatchQueue(label: "tests.value.reader.\($0)") }
    let reads = (0..<40).map { index in promise.map(on: queues[index % 4]) { $0.text } }
    resolver.fulfill(Large())
    for read in reads { #expect(try await read.value == "large") }
  }
}
