import Dispatch
import Testing

@testable import Promises

/// `Promise.all` (array and heterogeneous) and `Promise.allSettled`.
@Suite("Promise.all and allSettled", .timeLimit(.minutes(1)))
struct PromiseAllTests {
  @Test func allOfAnEmptyArrayIsFulfilledWithAnEmptyArray() async throws {
    let all = Promise<Int>.all([])
    #expect(try await all.value == [])
  }

  @Test func allKeepsInputOrderWhenInputsAreFulfilledInReverse() async throws {
    let pairs = (0..<10).map { _ in Promise<Int>.pending() }
    let all = Promise.all(pairs.map(\.promise))
    for (index, pair) in pairs.enumerated().reversed() {
      pair.resolver.fulfill(index * 10)
    }
    #expect(try await all.value == (0..<10).map { $0 * 10 })
  }

  @Test func allOfSettledAndPendingInputs() async throws {
    let (pending, resolver) = Promise<Int>.pending()
    let all = Promise.all([Promise(1), pending, Promise(3)])
    #expect(all.isPending)
    resolver.fulfill(2)
    #expect(try await all.value == [1, 2, 3])
  }

  @Test func theFirstRejectionWins() async {
    let pairs = (0..<4).map { _ in Promise<Int>.pending() }
    let all = Promise.all(pairs.map(\.promise))
    pairs[0].resolver.fulfill(0)
    pairs[2].resolver.reject(CoreTestError.numbered(2))
    pairs[1].resolver.reject(CoreTestError.numbered(1))
    pairs[3].resolver.fulfill(3)
    await #expect(throws: CoreTestError.numbered(2)) { try await all.value }
  }

  @Test func aRejectionSettlesAllWithoutWaitingForTheOthers() async {
    let (pending, resolver) = Promise<Int>.pending()
    let error = IdentifiedError()
    let all = Promise.all([pending, Promise(error: error)])
    #expect(isSame(await rejectionError(of: all), as: error))
    #expect(pending.isPending)
    resolver.fulfill(1)
  }

  @Test func allAcceptsTheSamePromiseTwice() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    let all = Promise.all([promise, promise])
    resolver.fulfill(5)
    #expect(try await all.value == [5, 5])
  }

  @Test func callbacksOnAllRunOnTheirQueue() async throws {
    let checker = QueueChecker()
    let queue = DispatchQueue(label: "tests.all.queue")
    let sum = Promise.all([Promise(1), Promise(2)]).map(on: queue) { values -> Int in
      checker.verify(queue)
      return values.reduce(0, +)
    }
    #expect(try await sum.value == 3)
    checker.expectAllOnQueue(count: 1)
  }

  // MARK: ownership of the values

  /// Fulfils three inputs with `values`, or the first two before rejecting the third, and
  /// releases the inputs and the aggregate; returns what the aggregate settled with.
  @inline(never)
  private func settleAll(
    of values: [CountedRelease], rejectingLast: Bool
  ) -> (fulfilled: Bool, inOrder: Bool) {
    let pairs = (0..<3).map { _ in Promise<CountedRelease>.pending() }
    let all = Promise.all(pairs.map(\.promise))
    pairs[1].resolver.fulfill(values[1])
    pairs[0].resolver.fulfill(values[0])
    if rejectingLast {
      pairs[2].resolver.reject(CoreTestError.first)
    } else {
      pairs[2].resolver.fulfill(values[2])
    }
    // Inputs forward inline: the aggregate has settled when the last call returns.
    let result = try? all.result?.get()
    let inOrder = result.map { zip($0, values).allSatisfy { $0 === $1 } } ?? false
    return (result != nil, inOrder)
  }

  @Test(arguments: [false, true])
  func theAggregateReleasesEachValueItHeldExactlyOnce(rejectingLast: Bool) {
    let releases = Guarded(0)
    var values = (0..<3).map { _ in CountedRelease(releases) }
    let (fulfilled, inOrder) = settleAll(of: values, rejectingLast: rejectingLast)
    #expect(fulfilled == !rejectingLast)
    #expect(inOrder == !rejectingLast)
    // Still held here: a value released once too often (moved out, then destroyed again by
    // the aggregate's deinit) would be freed by now.
    #expect(releases.value == 0)
    values = []
    // A value left behind in the released aggregate (received before a rejection) would leak.
    #expect(releases.value == 3)
  }

  /// One round: two threads fulfil the last inputs while a third cancels the aggregate.
  @inline(never)
  private func raceTheLastValueAgainstCancellation() async -> (
    finished: Bool, outcomeIsConsistent: Bool, tokens: [WeakObserver<LifetimeToken>]
  ) {
    let pairs = (0..<3).map { _ in Promise<LifetimeToken>.pending() }
    let all = Promise.all(pairs.map(\.promise))
    let first = LifetimeToken("value 0")
    pairs[0].resolver.fulfill(first)
    // The threads take what they use out of boxes: a `Thread` may keep its closure a moment
    // after `runOnThreads` returns, and must not keep the tokens alive through it (the inputs
    // hold their values, the aggregate its result).
    let tokens = [first, LifetimeToken("value 1"), LifetimeToken("value 2")]
    let work = Guarded<[(Promise<LifetimeToken>.Resolver, LifetimeToken)?]>(
      [nil, (pairs[1].resolver, tokens[1]), (pairs[2].resolver, tokens[2])])
    let shared = Guarded<Promise<[LifetimeToken]>?>(all)
    let finished = await runOnThreads(3) { thread in
      if thread == 0 {
        let aggregate = shared.withLock { shared in
          defer { shared = nil }
          return shared
        }
        aggregate?.cancel()
        return
      }
      let taken = work.withLock { work in
        defer { work[thread] = nil }
        return work[thread]
      }
      if let (resolver, token) = taken { resolver.fulfill(token) }
    }
    let consistent: Bool
    switch all.result {
    case .success(let values): consistent = zip(values, tokens).allSatisfy { $0 === $1 }
    case .failure(let error): consistent = error is CancellationError
    case nil: consistent = false
    }
    return (finished, consistent, tokens.map { WeakObserver($0) })
  }

  @Test func aCancellationRacingTheLastValueSettlesOnceAndReleasesEveryValue() async {
    for _ in 0..<200 {
      let (finished, consistent, tokens) = await raceTheLastValueAgainstCancellation()
      #expect(finished)
      #expect(consistent)
      #expect(tokens.allSatisfy { $0.isNil })
    }
  }

  @Test func inputsFulfilledFromManyThreadsAtOnceKeepInputOrder() async throws {
    for _ in 0..<50 {
      let pairs = (0..<8).map { _ in Promise<Int>.pending() }
      let all = Promise.all(pairs.map(\.promise))
      let finished = await runOnThreads(4) { thread in
        pairs[thread].resolver.fulfill(thread)
        pairs[thread + 4].resolver.fulfill(thread + 4)
      }
      #expect(finished)
      #expect(try await all.value == Array(0..<8))
    }
  }

  // MARK: heterogeneous

  @Test func heterogeneousAllOfTwoTypes() async throws {
    let (text, resolver) = Promise<String>.pending()
    let both = Promise.all(Promise(1), text)
    resolver.fulfill("one")
    let (number, string) = try await both.value
    #expect(number == 1)
    #expect(string == "one")
  }

  @Test func heterogeneousAllOfFourTypesKeepsArgumentOrder() async throws {
    let (a, ra) = Promise<Int>.pending()
    let (b, rb) = Promise<String>.pending()
    let (c, rc) = Promise<Double>.pending()
    let (d, rd) = Promise<[Bool]>.pending()
    let all = Promise.all(a, b, c, d)
    rd.fulfill([true, false])
    rc.fulfill(2.5)
    rb.fulfill("b")
    ra.fulfill(1)
    let (first, second, third, fourth) = try await all.value
    #expect(first == 1)
    #expect(second == "b")
    #expect(third == 2.5)
    #expect(fourth == [true, false])
  }

  @Test func heterogeneousAllRejectsWithTheFirstRejection() async {
    let (a, ra) = Promise<Int>.pending()
    let (b, rb) = Promise<String>.pending()
    let all = Promise.all(a, b, Promise(true))
    rb.reject(CoreTestError.second)
    ra.reject(CoreTestError.first)
    await #expect(throws: CoreTestError.second) { try await all.value }
  }

  // MARK: allSettled

  @Test func allSettledReportsEveryOutcomeInInputOrder() async throws {
    let pairs = (0..<4).map { _ in Promise<Int>.pending() }
    let settled = Promise.allSettled(pairs.map(\.promise))
    pairs[3].resolver.fulfill(3)
    pairs[1].resolver.reject(CoreTestError.numbered(1))
    pairs[0].resolver.fulfill(0)
    pairs[2].resolver.reject(CoreTestError.numbered(2))
    let outcomes = try await settled.value.map { $0.mapError { $0 as! CoreTestError } }
    #expect(outcomes == [.success(0), .failure(.numbered(1)), .failure(.numbered(2)), .success(3)])
  }

  @Test func allSettledOfAnEmptyArrayIsEmpty() async throws {
    #expect(try await Promise<Int>.allSettled([]).value.isEmpty)
  }

  @Test func allSettledMarksTheRejectedInputsAsHandled() async throws {
    let rejected = Promise<Int>(error: CoreTestError.first)
    _ = try await Promise.allSettled([rejected]).value
    #expect(rejected.flags.contains(.observed))
  }
}

/// Counts its deinitializations, to catch a value released too often or never.
final class CountedRelease: Sendable {
  let releases: Guarded<Int>
  init(_ releases: Guarded<Int>) { self.releases = releases }
  deinit { releases.increment() }
}
