import Dispatch
import Testing

@testable import Promises

/// Very long chains settle in a loop, on a flat stack: no recursion in settling, adopting,
/// cancelling or freeing. The timings are printed, never asserted. The suite is serialized so
/// that only one million-link chain is in memory at a time.
@Suite("Deep chains", .serialized, .timeLimit(.minutes(2)))
struct DeepChainTests {
  /// A million links; a tenth of that under ThreadSanitizer (see `isThreadSanitizerActive`).
  private static let million = isThreadSanitizerActive ? 100_000 : 1_000_000
  private static let hundredThousand = isThreadSanitizerActive ? 10_000 : 100_000

  private func report(_ what: String, build: Duration, settle: Duration) {
    let note = isThreadSanitizerActive ? " (TSan: lengths divided by 10)" : ""
    print("DeepChain: \(what): build \(build), settle \(settle)\(note)")
  }

  /// Builds `length` `then` links on `queue` from `head`.
  private func chain(from head: Promise<Int>, length: Int, on queue: DispatchQueue) -> Promise<Int> {
    var tail = head
    for _ in 0..<length { tail = tail.map(on: queue) { $0 + 1 } }
    return tail
  }

  @Test(arguments: [CallbackQueueKind.serial, .concurrent])
  func aMillionThenLinksSettleWithoutOverflowingTheStack(kind: CallbackQueueKind) async throws {
    let queue = kind.makeQueue()
    let clock = ContinuousClock()
    let (head, resolver) = Promise<Int>.pending()
    let start = clock.now
    let tail = chain(from: head, length: Self.million, on: queue)
    let built = clock.now
    resolver.fulfill(0)
    #expect(try await tail.value == Self.million)
    report("1M then links, pending head, \(kind) queue", build: built - start, settle: clock.now - built)
  }

  @Test func aMillionThenLinksOnAnAlreadyFulfilledHeadSettle() async throws {
    // The chain starts settling while it is still being built: the builder races the drain.
    let queue = DispatchQueue(label: "tests.deep.resolved")
    let clock = ContinuousClock()
    let start = clock.now
    let tail = chain(from: Promise(0), length: Self.million, on: queue)
    let built = clock.now
    #expect(try await tail.value == Self.million)
    report("1M then links, fulfilled head, serial queue", build: built - start, settle: clock.now - built)
  }

  @Test func aHundredThousandPromiseReturningThensSettle() async throws {
    let clock = ContinuousClock()
    let (head, resolver) = Promise<Int>.pending()
    let start = clock.now
    var tail = head
    for _ in 0..<Self.hundredThousand { tail = tail.then { value in Promise(value + 1) } }
    let built = clock.now
    resolver.fulfill(0)
    #expect(try await tail.value == Self.hundredThousand)
    report("100k promise-returning then links", build: built - start, settle: clock.now - built)
  }

  @Test func aHundredThousandNestedAdoptionsSettle() async throws {
    // Each level's body returns the next level's promise: the outermost promise adopts a
    // promise that adopts a promise … 100,000 deep. Settling the innermost one must unwind
    // the adoptions in a loop.
    @Sendable func nested(_ depth: Int) -> Promise<Int> {
      if depth == 0 { return Promise(0) }
      return Promise(depth).then { depth in nested(depth - 1).map { $0 + 1 } }
    }
    let clock = ContinuousClock()
    let start = clock.now
    #expect(try await nested(Self.hundredThousand).value == Self.hundredThousand)
    print("DeepChain: 100k nested adoptions: \(clock.now - start)")
  }

  @Test func aHundredThousandAdoptionsOfPendingPromisesSettle() async throws {
    // Every link adopts a promise that is still pending when it is adopted, fulfilled later
    // from another queue.
    let clock = ContinuousClock()
    let (head, resolver) = Promise<Int>.pending()
    let fulfiller = DispatchQueue(label: "tests.deep.fulfiller")
    var tail = head
    for _ in 0..<Self.hundredThousand {
      tail = tail.then { value -> Promise<Int> in
        let (inner, innerResolver) = Promise<Int>.pending()
        fulfiller.async { innerResolver.fulfill(value + 1) }
        return inner
      }
    }
    let start = clock.now
    resolver.fulfill(0)
    #expect(try await tail.value == Self.hundredThousand)
    print("DeepChain: 100k adoptions of pending promises: settle \(clock.now - start)")
  }

  @Test func aHundredThousandRecoversSettle() async throws {
    let clock = ContinuousClock()
    let (head, resolver) = Promise<Int>.pending()
    let start = clock.now
    var tail = head
    for index in 0..<Self.hundredThousand {
      if index.isMultiple(of: 2) {
        tail = tail.recover { _ -> Int in throw CoreTestError.numbered(index) }
      } else {
        tail = tail.recover { _ in Promise(error: CoreTestError.numbered(index)) }
      }
    }
    tail = tail.recover { error -> Int in
      guard case .numbered(let last)? = error as? CoreTestError else { throw error }
      return last
    }
    let built = clock.now
    resolver.reject(CoreTestError.first)
    #expect(try await tail.value == Self.hundredThousand - 1)
    report("100k recover links", build: built - start, settle: clock.now - built)
  }

  @Test func aRejectionSkipsAMillionThenLinks() async throws {
    let queue = DispatchQueue(label: "tests.deep.rejected")
    let clock = ContinuousClock()
    let (head, resolver) = Promise<Int>.pending()
    let start = clock.now
    let tail = chain(from: head, length: Self.million, on: queue).recover { _ in -1 }
    let built = clock.now
    resolver.reject(CoreTestError.first)
    #expect(try await tail.value == -1)
    report("1M then links skipped by a rejection", build: built - start, settle: clock.now - built)
  }

  @Test func cancellingTheTailOfAMillionLinkChainReachesTheHead() async throws {
    let queue = DispatchQueue(label: "tests.deep.cancel")
    let (head, resolver) = Promise<Int>.pending()
    let cancelled = Guarded(0)
    resolver.onCancel { cancelled.increment() }
    let tail = chain(from: head, length: Self.million, on: queue)
    let clock = ContinuousClock()
    let start = clock.now
    tail.cancel()
    let propagated = clock.now
    #expect(cancelled.value == 1, "cancellation travelled up a million links to the head")
    #expect(head.isCancelled)
    await #expect(throws: CancellationError.self) { try await tail.value }
    await drainQueue(queue)
    print(
      "DeepChain: cancel the tail of 1M links: propagate \(propagated - start), drain \(clock.now - propagated)"
    )
  }

  @Test func releasingTheResolverOfAMillionLinkChainBreaksEveryLink() async throws {
    let queue = DispatchQueue(label: "tests.deep.broken")
    let box = Guarded<Promise<Int>.Resolver?>(nil)
    let head: Promise<Int> = {
      let (promise, resolver) = Promise<Int>.pending()
      box.value = resolver
      return promise
    }()
    let tail = chain(from: head, length: Self.million, on: queue)
    let clock = ContinuousClock()
    let start = clock.now
    box.value = nil
    let error = await rejectionError(of: tail)
    guard case .brokenPromise? = error as? PromiseError else {
      Issue.record("expected brokenPromise, got \(String(describing: error))")
      return
    }
    print("DeepChain: break a 1M-link chain: \(clock.now - start)")
  }
}
