import Dispatch
import Foundation
import Testing

@testable import Promises

/// Cancelling one branch chained on a shared promise cancels the shared work only when nothing
/// else still waits on it. Every combinator and adapter that waits on an input must count as
/// waiting while its own result is pending.
@Suite("Shared inputs: a pending combinator protects its input", .timeLimit(.minutes(1)))
struct SharedInputTests {
  /// Every way of waiting on a promise: each makes an observer of `shared` and returns a
  /// promise that settles when the observer has seen `shared`'s outcome.
  enum Observer: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case then, thenReturningPromise, recover, recoverReturningPromise, `catch`, always
    case whenSettled, validate, asVoid, all, allOfDifferentTypes, allSettled, race, any
    case timeout, delay, retry, fanOut, awaitValue, wait

    var testDescription: String { rawValue }

    /// Starts observing `shared`; returns once the observer is registered on it.
    func observe(_ shared: Promise<Int>, queue: DispatchQueue) async -> Promise<Int> {
      switch self {
      case .then: return shared.map(on: queue) { $0 }
      case .thenReturningPromise: return shared.then(on: queue) { Promise($0) }
      case .recover: return shared.recover(on: queue) { _ in 0 }
      case .recoverReturningPromise: return shared.recover(on: queue) { _ in Promise(0) }
      case .catch: return shared.catch(on: queue) { _ in }
      case .always: return shared.always(on: queue) {}
      case .whenSettled: return shared.whenSettled(on: queue) { _ in }
      case .validate: return shared.validate(on: queue) { _ in true }
      case .asVoid: return shared.asVoid(on: queue).map(on: queue) { 1 }
      case .all: return Promise.all([shared]).map(on: queue) { $0[0] }
      case .allOfDifferentTypes: return Promise.all(shared, Promise("x")).map(on: queue) { $0.0 }
      case .allSettled: return Promise.allSettled([shared]).map(on: queue) { try $0[0].get() }
      case .race: return Promise.race([shared])
      case .any: return Promise.any([shared])
      case .timeout: return shared.timeout(.seconds(60))
      case .delay: return shared.delay(.milliseconds(1))
      case .retry:
        let result = Promise.retry(on: queue) { shared }
        await drainQueue(queue)  // the first attempt registers on `queue`
        return result
      case .fanOut:
        let result = Promise<Int>.map(on: queue, [0], maxConcurrent: 1) { _ in shared }
        await drainQueue(queue)
        return result.map(on: queue) { $0[0] }
      case .awaitValue:
        let (observed, resolver) = Promise<Int>.pending()
        Task { resolver.resolve(await settledOutcome(of: shared)) }
        await yieldUntil { callbacksWaiting(on: shared) == 1 }
        return observed
      case .wait:
        let (observed, resolver) = Promise<Int>.pending()
        Thread { resolver.resolve(Result { try shared.wait(timeout: 60) }) }.start()
        await yieldUntil { callbacksWaiting(on: shared) == 1 }
        return observed
      }
    }
  }

  @Test("while pending, it protects its shared input", arguments: Observer.allCases)
  func whilePendingItProtectsItsSharedInput(_ observer: Observer) async throws {
    let (shared, resolver) = Promise<Int>.pending()
    let workCancelled = Guarded(false)
    resolver.onCancel { workCancelled.value = true }
    let queue = DispatchQueue(label: "tests.shared-input")
    let observed = await observer.observe(shared, queue: queue)

    // Another branch on the same input gives up.
    shared.map(on: queue) { $0 }.cancel()

    #expect(shared.isPending, "the shared input was cancelled while \(observer) still waits on it")
    #expect(!workCancelled.value)
    resolver.fulfill(5)
    let value = try await observed.value
    #expect(value == (observer == .asVoid ? 1 : 5))
  }

  @Test("once it has given up, it no longer protects its input", arguments: [Observer.race, .timeout, .any])
  func onceCancelledItNoLongerProtectsItsInput(_ observer: Observer) async {
    let (shared, resolver) = Promise<Int>.pending()
    let workCancelled = Guarded(false)
    resolver.onCancel { workCancelled.value = true }
    let observed = await observer.observe(shared, queue: DispatchQueue(label: "tests.shared-input"))
    let branch = shared.map { $0 }
    observed.cancel()
    #expect(shared.isPending, "the branch still waits")
    branch.cancel()
    #expect(shared.isRejected)
    #expect(workCancelled.value)
  }

  @Test func combinatorsThatAreDoneLeaveNoNodesInAnInputThatStaysPending() async throws {
    // A shared promise that stays pending, given many races, `any`s and timeouts that end
    // without it, must not pile up their nodes.
    let (shared, resolver) = Promise<Int>.pending()
    let keep = shared.map { $0 }
    for _ in 0..<100 {
      #expect(try await Promise.race([shared, Promise(1)]).value == 1)
      #expect(try await Promise.any([shared, Promise(2)]).value == 2)
      let limited = shared.timeout(.seconds(60))
      limited.cancel()
      _ = await settledOutcome(of: limited)
    }
    #expect(callbacksWaiting(on: shared) == 1, "only `keep` still waits")
    resolver.fulfill(3)
    #expect(try await keep.value == 3)
  }
}
