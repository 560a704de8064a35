import Dispatch
import Foundation
import Testing

@testable import Promises

private typealias Kit = CombinatorTestKit

/// A pending promise whose cancellation handler is counted.
private func cancellableSource() -> (Promise<Int>, Promise<Int>.Resolver, Kit.Locked<Int>) {
  let cancellations = Kit.Locked(0)
  let (promise, resolver) = Promise<Int>.pending()
  resolver.onCancel { cancellations.withValue { $0 += 1 } }
  return (promise, resolver, cancellations)
}

@Suite("Promise.timeout", .timeLimit(.minutes(1)))
struct PromiseTimeoutTests {
  @Test("a promise that settles in time passes its value through and cancels the timer")
  func valueInTime() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver) = Promise<Int>.pending()
    let limited = source.timeout(.seconds(5), scheduler: clock)
    #expect(clock.pendingCount == 1)
    resolver.fulfill(7)
    #expect(try await limited.value == 7)
    #expect(clock.pendingCount == 0)
  }

  @Test("a rejection that comes in time passes through unchanged")
  func rejectionInTime() async throws {
    let clock = VirtualTimeScheduler()
    let limited = Promise<Int>(error: Kit.Failure(1)).timeout(.seconds(5), scheduler: clock)
    await #expect(throws: Kit.Failure(1)) { try await limited.value }
    #expect(clock.pendingCount == 0)
  }

  @Test("it times out exactly at the deadline and not a nanosecond before")
  func timesOutAtDeadline() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver) = Promise<Int>.pending()
    let limited = source.timeout(.seconds(5), scheduler: clock)
    clock.advance(by: .seconds(5) - .nanoseconds(1))
    #expect(limited.isPending)
    clock.advance(by: .nanoseconds(1))
    #expect(limited.isRejected)
    await #expect(throws: PromiseError.timedOut(after: .seconds(5), createdAt: limited.creationSite)) {
      try await limited.value
    }
    resolver.fulfill(1)  // too late: ignored
    #expect(limited.isRejected)
  }

  @Test("timing out cancels the source when nothing else waits on it")
  func timeoutCancelsSoleObservedSource() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver, cancellations) = cancellableSource()
    let limited = source.timeout(.seconds(1), scheduler: clock)
    clock.advance(by: .seconds(1))
    await #expect(throws: PromiseError.self) { try await limited.value }
    #expect(cancellations.value == 1)
    await #expect(throws: CancellationError.self) { try await source.value }
    withExtendedLifetime(resolver) {}
  }

  @Test("timing out leaves the source running when something else waits on it")
  func timeoutSparesSharedSource() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver, cancellations) = cancellableSource()
    let other = source.map { $0 * 2 }
    let limited = source.timeout(.seconds(1), scheduler: clock)
    clock.advance(by: .seconds(1))
    await #expect(throws: PromiseError.self) { try await limited.value }
    #expect(cancellations.value == 0)
    #expect(source.isPending)
    resolver.fulfill(21)
    #expect(try await other.value == 42)
  }

  @Test("after a timeout, the source is cancelled once its other observers are cancelled")
  func timedOutLinkNoLongerCountsAsObserver() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver, cancellations) = cancellableSource()
    let other = source.map { $0 }
    let limited = source.timeout(.seconds(1), scheduler: clock)
    clock.advance(by: .seconds(1))
    #expect(limited.isRejected)
    #expect(cancellations.value == 0)
    other.cancel()
    #expect(cancellations.value == 1)
    withExtendedLifetime(resolver) {}
  }

  @Test("cancelling the timeout promise cancels the source and the timer")
  func cancellingCancelsSourceAndTimer() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver, cancellations) = cancellableSource()
    let limited = source.timeout(.seconds(1), scheduler: clock)
    limited.cancel()
    #expect(clock.pendingCount == 0)
    #expect(cancellations.value == 1)
    await #expect(throws: CancellationError.self) { try await limited.value }
    withExtendedLifetime(resolver) {}
  }

  @Test("cancelling the timeout promise spares a source that others observe")
  func cancellingSparesSharedSource() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver, cancellations) = cancellableSource()
    source.whenSettled { _ in }
    let limited = source.timeout(.seconds(1), scheduler: clock)
    limited.cancel()
    #expect(cancellations.value == 0)
    #expect(source.isPending)
    #expect(clock.pendingCount == 0)
    resolver.fulfill(1)
  }

  @Test("the timer's work runs on the given queue; chained callbacks on theirs")
  func queues() async throws {
    let clock = VirtualTimeScheduler()
    let timerQueue = DispatchQueue(label: "timeout.timer")
    let callbackQueue = DispatchQueue(label: "timeout.callback")
    let recording = Kit.RecordingScheduler(clock)
    let (source, resolver) = Promise<Int>.pending()
    let observed = source.timeout(.seconds(1), on: timerQueue, scheduler: recording)
      .recover(on: callbackQueue) { error -> Int in
        dispatchPrecondition(condition: .onQueue(callbackQueue))
        return -1
      }
    #expect(recording.requestedQueues.count == 1)
    #expect(recording.requestedQueues.first === timerQueue)
    clock.advance(by: .seconds(1))
    #expect(try await observed.value == -1)
    withExtendedLifetime(resolver) {}
  }

  @Test("nothing is retained after the source settles first")
  func nothingRetainedAfterValue() async throws {
    let clock = VirtualTimeScheduler()
    var (source, resolver): (Promise<Kit.Canary>?, Promise<Kit.Canary>.Resolver?) = Promise<Kit.Canary>
      .pending()
    var limited: Promise<Kit.Canary>? = source!.timeout(.seconds(60), scheduler: clock)
    let weakLimited = Kit.Weak(limited)
    let weakValue: Kit.Weak
    do {
      let canary = Kit.Canary()
      weakValue = Kit.Weak(canary)
      resolver!.fulfill(canary)
    }
    #expect(try await limited!.value.name == "canary")
    #expect(clock.pendingCount == 0)
    (source, resolver, limited) = (nil, nil, nil)
    #expect(await Kit.eventually { weakLimited.isReleased && weakValue.isReleased })
  }

  @Test("nothing is retained after timing out, even while a shared source is still pending")
  func nothingRetainedAfterTimeout() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver) = Promise<Int>.pending()
    source.whenSettled { _ in }
    var limited: Promise<Int>? = source.timeout(.seconds(1), scheduler: clock)
    let weakLimited = Kit.Weak(limited)
    clock.advance(by: .seconds(1))
    await #expect(throws: PromiseError.self) { try await limited!.value }
    limited = nil
    #expect(await Kit.eventually { weakLimited.isReleased })
    #expect(source.isPending)
    resolver.fulfill(1)
  }

  /// Settles `source` with `outcome`, then fires `clock`'s due timers before the source's
  /// internal observers (the forwarding to a timeout) have run: what a settling thread
  /// preempted between its settlement and the forwarding lets happen in real time.
  ///
  /// An internal node runs inside the settlement of `trigger`; a settlement it makes queues
  /// its own internal nodes behind it, on the same thread, until it returns.
  private static func settleThenFireTimer(
    _ source: Promise<Int>.Resolver, with outcome: Result<Int, any Error>,
    advancing clock: VirtualTimeScheduler, by duration: Duration
  ) -> (settledFirst: Bool, ran: Int) {
    let (trigger, pull) = Promise<Void>.pending()
    let report = Kit.Locked((settledFirst: false, ran: 0))
    trigger.register(
      ForwardingNode<Void> { _ in
        source.resolve(outcome)
        let settled = !source.token.promise.isPending
        let ran = clock.advance(by: duration)
        report.withValue { $0 = (settled, ran) }
      })
    pull.fulfill()
    return report.value
  }

  @Test("a source settled before the timer fires wins, though its forwarding has not run yet")
  func sourceSettledBeforeTheTimerWins() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver) = Promise<Int>.pending()
    let limited = source.timeout(.seconds(1), on: DispatchQueue(label: "timeout.timer"), scheduler: clock)
    let (settledFirst, ran) = Self.settleThenFireTimer(
      resolver, with: .success(7), advancing: clock, by: .seconds(1))
    #expect(settledFirst)
    #expect(ran == 1)
    #expect(try await limited.value == 7)
    #expect(!source.isPending)
  }

  @Test("a source rejected before the timer fires passes its own error on, not a timeout")
  func sourceRejectedBeforeTheTimerWins() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver) = Promise<Int>.pending()
    let limited = source.timeout(.seconds(1), on: DispatchQueue(label: "timeout.timer"), scheduler: clock)
    let (settledFirst, ran) = Self.settleThenFireTimer(
      resolver, with: .failure(Kit.Failure(2)), advancing: clock, by: .seconds(1))
    #expect(settledFirst)
    #expect(ran == 1)
    await #expect(throws: Kit.Failure(2)) { try await limited.value }
  }

  @Test("real time: a promise that never settles times out, one that settles wins")
  func realTimeOrdering() async throws {
    let (never, keep) = Promise<Int>.pending()
    let timedOut = never.timeout(.milliseconds(20), scheduler: DispatchTimeScheduler())
    await #expect(throws: PromiseError.self) { try await timedOut.value }
    let quick = Promise(5).timeout(.seconds(60), scheduler: DispatchTimeScheduler())
    #expect(try await quick.value == 5)
    withExtendedLifetime(keep) {}
  }
}
