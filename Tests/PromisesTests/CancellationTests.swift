import Dispatch
import Testing

@testable import Promises

/// `cancel()`, `Resolver.onCancel`, and cancellation travelling upstream and across async code.
@Suite("Cancellation", .timeLimit(.minutes(1)))
struct CancellationTests {
  /// A pending promise whose cancellation handler counts how often it ran.
  private func cancellable(
    file: StaticString = #fileID, line: UInt = #line
  ) -> (promise: Promise<Int>, resolver: Promise<Int>.Resolver, cancelled: Guarded<Int>) {
    let (promise, resolver) = Promise<Int>.pending(file: file, line: line)
    let cancelled = Guarded(0)
    resolver.onCancel { cancelled.increment() }
    return (promise, resolver, cancelled)
  }

  // MARK: cancel()

  @Test func cancelRejectsAPendingPromiseWithCancellationError() async {
    let (promise, resolver) = Promise<Int>.pending()
    promise.cancel()
    #expect(promise.isRejected)
    #expect(promise.isCancelled)
    #expect(resolver.isCancelled)
    #expect(!resolver.isPending)
    await #expect(throws: CancellationError.self) { try await promise.value }
  }

  @Test func cancelIsANoOpOnAFulfilledPromise() async throws {
    let (promise, resolver, cancelled) = cancellable()
    resolver.fulfill(3)
    promise.cancel()
    #expect(try await promise.value == 3)
    #expect(cancelled.value == 0)
    #expect(!resolver.isCancelled)
  }

  @Test func cancelIsANoOpOnARejectedPromise() async {
    let (promise, resolver, cancelled) = cancellable()
    resolver.reject(CoreTestError.first)
    promise.cancel()
    await #expect(throws: CoreTestError.first) { try await promise.value }
    #expect(cancelled.value == 0)
  }

  @Test func aFulfilAfterCancelIsIgnored() async {
    let (promise, resolver) = Promise<Int>.pending()
    promise.cancel()
    resolver.fulfill(1)
    await #expect(throws: CancellationError.self) { try await promise.value }
  }

  // MARK: onCancel

  @Test func cancellationHandlersRunExactlyOnceOnCancel() async {
    await confirmation(expectedCount: 2) { ran in
      let (promise, resolver) = Promise<Int>.pending()
      resolver.onCancel { ran() }
      resolver.onCancel { ran() }
      promise.cancel()
      promise.cancel()
      resolver.fulfill(1)
    }
  }

  @Test func cancellationHandlersDoNotRunOnNormalSettlement() async {
    await confirmation(expectedCount: 0) { ran in
      let (fulfilled, fulfilResolver) = Promise<Int>.pending()
      fulfilResolver.onCancel { ran() }
      fulfilResolver.fulfill(1)
      fulfilled.cancel()

      let (rejected, rejectResolver) = Promise<Int>.pending()
      rejectResolver.onCancel { ran() }
      rejectResolver.reject(CoreTestError.first)
      rejected.cancel()
      _ = await settledOutcome(of: rejected)
    }
  }

  @Test func aHandlerAddedAfterCancellationRunsAtOnce() async {
    await confirmation(expectedCount: 1) { ran in
      let (promise, resolver) = Promise<Int>.pending()
      promise.cancel()
      resolver.onCancel { ran() }
    }
  }

  @Test func aHandlerAddedAfterFulfilmentNeverRuns() async {
    await confirmation(expectedCount: 0) { ran in
      let (promise, resolver) = Promise<Int>.pending()
      resolver.fulfill(1)
      resolver.onCancel { ran() }
      promise.cancel()
    }
  }

  @Test func cancellationHandlersRunOnTheCancellingThreadBeforeCancelReturns() {
    let (promise, resolver) = Promise<Int>.pending()
    let ran = Guarded(false)
    resolver.onCancel { ran.value = true }
    promise.cancel()
    #expect(ran.value)
  }

  // MARK: Upstream propagation

  @Test func cancellingTheTailOfAChainCancelsItsUnobservedHead() async {
    let (head, resolver, cancelled) = cancellable()
    let tail = head.map { $0 + 1 }.map { $0 * 2 }
    tail.cancel()
    #expect(cancelled.value == 1)
    #expect(head.isCancelled)
    await #expect(throws: CancellationError.self) { try await tail.value }
    await #expect(throws: CancellationError.self) { try await head.value }
    _ = resolver
  }

  @Test func cancellingTheTailDoesNotCancelAHeadWithAnotherObserver() async throws {
    let (head, resolver, cancelled) = cancellable()
    let tail = head.map { $0 + 1 }.map { $0 * 2 }
    let other = head.map { $0 - 1 }
    tail.cancel()
    #expect(cancelled.value == 0)
    #expect(head.isPending)
    resolver.fulfill(10)
    #expect(try await other.value == 9)
    await #expect(throws: CancellationError.self) { try await tail.value }
  }

  @Test func cancellingTheTailStopsAtTheFirstSharedLink() async throws {
    let (head, resolver, cancelled) = cancellable()
    let shared = head.map { $0 + 1 }
    let tail = shared.map { $0 * 2 }.map { $0 }
    let other = shared.map { $0 }
    tail.cancel()
    #expect(shared.isPending)
    #expect(cancelled.value == 0)
    resolver.fulfill(1)
    #expect(try await other.value == 2)
  }

  @Test func cancellingEveryObserverOfASharedPromiseCancelsIt() async {
    // Once both observers are cancelled nobody observes the head any more, so its work is
    // cancelled too.
    let (head, resolver, cancelled) = cancellable()
    let first = head.map { $0 + 1 }
    let second = head.map { $0 + 2 }
    first.cancel()
    #expect(cancelled.value == 0, "the head still has an observer")
    second.cancel()
    #expect(cancelled.value == 1, "nobody observes the head any more: its work should be cancelled")
    #expect(head.isCancelled)
    _ = resolver
  }

  @Test func cancellingAnAdopterCancelsTheAdoptedPromise() async {
    let (inner, resolver, cancelled) = cancellable()
    let outer = Promise(()).then { _ in inner }
    await yieldUntil { callbacksWaiting(on: inner) == 1 }
    outer.cancel()
    #expect(cancelled.value == 1)
    #expect(inner.isCancelled)
    _ = resolver
  }

  @Test func cancellingAPromiseWhoseBodyIsAboutToReturnAnInnerPromiseCancelsTheInnerOne() async {
    // The link is cancelled while its body runs; the promise the body returns has no other
    // observer, so it is cancelled rather than left running. (The body and the test hand over
    // with Dispatch primitives, not promises, so nothing waits on the body's own drain.)
    let (inner, resolver, cancelled) = cancellable()
    let started = DispatchGroup()
    started.enter()
    let proceed = DispatchSemaphore(value: 0)
    let queue = DispatchQueue(label: "tests.cancel.body")
    let outer = Promise(()).then(on: queue) { _ -> Promise<Int> in
      started.leave()
      _ = proceed.wait(timeout: .now() + 10)
      return inner
    }
    await awaitGroup(started)
    outer.cancel()
    proceed.signal()
    await #expect(throws: CancellationError.self) { try await outer.value }
    await drainQueue(queue)
    #expect(cancelled.value == 1)
    _ = resolver
  }

  @Test func cancellingAllCancelsItsInputs() async {
    let inputs = (0..<3).map { _ in cancellable() }
    let all = Promise.all(inputs.map(\.promise))
    all.cancel()
    for (index, input) in inputs.enumerated() {
      #expect(input.cancelled.value == 1, "input \(index) was not cancelled")
    }
    await #expect(throws: CancellationError.self) { try await all.value }
  }

  @Test func cancellingAllSparesAnInputWithAnotherObserver() async throws {
    let inputs = (0..<2).map { _ in cancellable() }
    let other = inputs[1].promise.map { $0 }
    let all = Promise.all(inputs.map(\.promise))
    all.cancel()
    #expect(inputs[0].cancelled.value == 1)
    #expect(inputs[1].cancelled.value == 0)
    inputs[1].resolver.fulfill(1)
    #expect(try await other.value == 1)
  }

  @Test func cancellingAChainBuiltOnAllCancelsTheInputs() async {
    let inputs = (0..<2).map { _ in cancellable() }
    let tail = Promise.all(inputs.map(\.promise)).map { $0.reduce(0, +) }
    tail.cancel()
    #expect(inputs.allSatisfy { $0.cancelled.value == 1 })
  }

  @Test func cancellingAHeterogeneousAllCancelsItsInputs() async {
    let (a, ra, cancelledA) = cancellable()
    let (b, rb) = Promise<String>.pending()
    let cancelledB = Guarded(0)
    rb.onCancel { cancelledB.increment() }
    let all = Promise.all(a, b)
    all.cancel()
    #expect(cancelledA.value == 1)
    #expect(cancelledB.value == 1)
    _ = ra
  }

  @Test func cancellingAllSettledCancelsItsInputs() async {
    let inputs = (0..<2).map { _ in cancellable() }
    let settled = Promise.allSettled(inputs.map(\.promise))
    settled.cancel()
    #expect(inputs.allSatisfy { $0.cancelled.value == 1 })
  }

  // MARK: Cancelled links

  @Test(arguments: CallbackQueueKind.allCases)
  func aCancelledLinksBodyNeverRuns(kind: CallbackQueueKind) async throws {
    let queue = kind.makeQueue()
    let (source, resolver) = Promise<Int>.pending()
    let ran = Guarded(false)
    let link = source.map(on: queue) { value -> Int in
      ran.value = true
      return value
    }
    // A second observer, registered after `link` on the same queue: once it has run, `link`'s
    // node has fired too. It also keeps `source` from being cancelled with `link`.
    let later = source.map(on: queue) { $0 }
    link.cancel()
    resolver.fulfill(1)
    #expect(try await later.value == 1)
    await drainQueue(queue)
    #expect(!ran.value)
    await #expect(throws: CancellationError.self) { try await link.value }
  }

  @Test func aCancelledRecoverBodyNeverRuns() async throws {
    let (source, resolver) = Promise<Int>.pending()
    let ran = Guarded(false)
    let link = source.recover { _ -> Promise<Int> in
      ran.value = true
      return Promise(0)
    }
    let later = source.recover { _ in 1 }
    link.cancel()
    resolver.reject(CoreTestError.first)
    #expect(try await later.value == 1)
    await drainQueue(.promises)
    #expect(!ran.value)
  }

  // MARK: async

  @Test func cancellingAnAsyncPromiseCancelsItsTask() async throws {
    let (observed, observedResolver) = Promise<Bool>.pending()
    let promise = Promise<Int> {
      await suspendUntilCancelled()
      observedResolver.fulfill(Task.isCancelled)
      throw CancellationError()
    }
    promise.cancel()
    await #expect(throws: CancellationError.self) { try await promise.value }
    #expect(try await observed.value, "the body saw Task.isCancelled")
  }

  @Test func cancellingTheTailOfAChainOnAnAsyncPromiseCancelsItsTask() async throws {
    let (observed, observedResolver) = Promise<Bool>.pending()
    let promise = Promise<Int> {
      await suspendUntilCancelled()
      observedResolver.fulfill(Task.isCancelled)
      return 0
    }
    let tail = promise.map { $0 + 1 }
    tail.cancel()
    #expect(try await observed.value)
    await #expect(throws: CancellationError.self) { try await promise.value }
  }

  @Test func cancellingATaskThatAwaitsValueCancelsThePromise() async {
    let (promise, resolver, cancelled) = cancellable()
    let task = Task { try await promise.value }
    await yieldUntil { callbacksWaiting(on: promise) == 1 }
    task.cancel()
    let result = await task.result
    #expect(throws: CancellationError.self) { try result.get() }
    #expect(promise.isCancelled)
    #expect(cancelled.value == 1)
    _ = resolver
  }

  @Test func cancellingATaskBeforeItAwaitsStillCancelsThePromise() async {
    let (promise, resolver, cancelled) = cancellable()
    let task = Task {
      await suspendUntilCancelled()
      return try await promise.value
    }
    task.cancel()
    let result = await task.result
    #expect(throws: CancellationError.self) { try result.get() }
    #expect(cancelled.value == 1)
    _ = resolver
  }

  @Test func cancellingATaskThatAwaitsADerivedPromiseSparesTheSharedOne() async throws {
    let (shared, resolver, cancelled) = cancellable()
    let other = shared.map { $0 }
    let task = Task { try await shared.map { $0 }.value }
    await yieldUntil { callbacksWaiting(on: shared) == 2 }
    task.cancel()
    _ = await task.result
    #expect(cancelled.value == 0)
    resolver.fulfill(2)
    #expect(try await other.value == 2)
  }

  @Test func aSourceWhoseLastReleaseCancelsTheAdoptingLinkDoesNotDeadlock() async {
    // The source's last reference goes when its link starts adopting another promise; the
    // value's deinit then cancels that very link. That user code must not run under the
    // link's lock (a spin lock: it would wait for itself forever). Only an optimised build
    // lets go of the source that early: CI runs this suite in release mode too.
    let link = Guarded<Promise<Int>?>(nil)
    let inner = Promise<Int>.pending()
    @inline(never) func start() {
      let (source, resolver) = Promise<CancelsOnDeinit>.pending()
      link.value = source.then { _ in inner.promise }
      resolver.fulfill(CancelsOnDeinit(link))
    }
    start()
    guard let adopting = link.value else { return }
    let outcome = await settledOutcome(of: adopting)
    #expect(throws: CancellationError.self) { try outcome.get() }
    link.value = nil
  }
}

/// Cancels the promise it is given when it goes away.
private final class CancelsOnDeinit: Sendable {
  let target: Guarded<Promise<Int>?>
  init(_ target: Guarded<Promise<Int>?>) { self.target = target }
  deinit { target.value?.cancel() }
}
