import Dispatch
import Foundation
import Promises
import Testing

private typealias Kit = CombinatorTestKit

@Suite("Promise.any", .timeLimit(.minutes(1)))
struct PromiseAnyTests {
  @Test("the first value wins, even after rejections")
  func firstValueWins() async throws {
    let (a, resolveA) = Promise<Int>.pending()
    let (b, resolveB) = Promise<Int>.pending()
    let (c, resolveC) = Promise<Int>.pending()
    let first = Promise.any([a, b, c])
    resolveA.reject(Kit.Failure(1))
    resolveC.fulfill(3)
    resolveB.fulfill(2)
    #expect(try await first.value == 3)
  }

  @Test("when every input is rejected, the errors come in input order")
  func allRejectedInInputOrder() async throws {
    let (a, resolveA) = Promise<Int>.pending()
    let (b, resolveB) = Promise<Int>.pending()
    let (c, resolveC) = Promise<Int>.pending()
    let first = Promise.any([a, b, c])
    resolveC.reject(Kit.Failure(3))
    resolveA.reject(Kit.Failure(1))
    #expect(first.isPending)
    resolveB.reject(Kit.Failure(2))
    let expected = PromiseError.allRejected([Kit.Failure(1), Kit.Failure(2), Kit.Failure(3)])
    await #expect(throws: expected) { try await first.value }
    do {
      _ = try await first.value
    } catch PromiseError.allRejected(let errors) {
      #expect(errors.map { ($0 as? Kit.Failure)?.code } == [1, 2, 3])
    }
  }

  @Test("rejections from many threads at once are all collected, in input order")
  func concurrentRejectionsAreAllCollected() async throws {
    for _ in 0..<100 {
      let pairs = (0..<8).map { _ in Promise<Int>.pending() }
      let first = Promise.any(pairs.map(\.promise))
      let finished = await runOnThreads(4) { thread in
        pairs[thread].resolver.reject(Kit.Failure(thread))
        pairs[thread + 4].resolver.reject(Kit.Failure(thread + 4))
      }
      #expect(finished)
      do {
        _ = try await first.value
        Issue.record("every input was rejected, yet any was fulfilled")
      } catch PromiseError.allRejected(let errors) {
        #expect(errors.map { ($0 as? Kit.Failure)?.code } == Array(0..<8))
      }
    }
  }

  @Test("an empty input is rejected with allRejected of no errors")
  func emptyInput() async {
    await #expect(throws: PromiseError.allRejected([])) { try await Promise<Int>.any([]).value }
  }

  @Test("callbacks on the result run on their own queue")
  func callbacksOnTheirQueue() async throws {
    let queue = DispatchQueue(label: "any.callback")
    let first = Promise.any([Promise(error: Kit.Failure(1)), Promise(2)]).map(on: queue) { value -> Int in
      dispatchPrecondition(condition: .onQueue(queue))
      return value
    }
    #expect(try await first.value == 2)
  }

  @Test("cancelling the result cancels the inputs nobody else waits on")
  func cancellingCancelsSoleObservedInputs() async throws {
    let cancelledA = Kit.Locked(0)
    let cancelledB = Kit.Locked(0)
    let (a, resolveA) = Promise<Int>.pending()
    resolveA.onCancel { cancelledA.withValue { $0 += 1 } }
    let (b, resolveB) = Promise<Int>.pending()
    resolveB.onCancel { cancelledB.withValue { $0 += 1 } }
    b.whenSettled { _ in }
    let first = Promise.any([a, b])
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    #expect(cancelledA.value == 1)
    #expect(cancelledB.value == 0)
    resolveB.fulfill(1)
  }

  @Test("once a value has won, another input is cancelled when its other observers are")
  func decidedAnyNoLongerObservesInputs() async throws {
    let cancelled = Kit.Locked(0)
    let (pending, resolver) = Promise<Int>.pending()
    resolver.onCancel { cancelled.withValue { $0 += 1 } }
    let other = pending.map { $0 }
    let first = Promise.any([pending, Promise(2)])
    #expect(try await first.value == 2)
    other.cancel()
    #expect(cancelled.value == 1)
  }

  @Test("inputs still pending do not keep the settled result alive")
  func nothingRetained() async throws {
    let (pending, resolver) = Promise<Int>.pending()
    var first: Promise<Int>? = Promise.any([Promise(error: Kit.Failure(1)), pending, Promise(5)])
    let weakFirst = Kit.Weak(first)
    #expect(try await first!.value == 5)
    first = nil
    #expect(await Kit.eventually { weakFirst.isReleased })
    withExtendedLifetime(resolver) {}
  }
}
