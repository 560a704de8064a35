import Dispatch
import Foundation
import Promises
import Testing

private typealias Kit = CombinatorTestKit

@Suite("Promise.delay and Promise.after", .timeLimit(.minutes(1)))
struct PromiseDelayTests {
  @Test("a value is passed on exactly when the delay has passed")
  func valueAfterDelay() async throws {
    let clock = VirtualTimeScheduler()
    let delayed = Promise(3).delay(.seconds(2), scheduler: clock)
    try await clock.waitForPendingWork()
    clock.advance(by: .seconds(2) - .nanoseconds(1))
    #expect(delayed.isPending)
    clock.advance(by: .nanoseconds(1))
    #expect(delayed.isFulfilled)
    #expect(try await delayed.value == 3)
  }

  @Test("a rejection is delayed too")
  func rejectionAfterDelay() async throws {
    let clock = VirtualTimeScheduler()
    let delayed = Promise<Int>(error: Kit.Failure(4)).delay(.seconds(1), scheduler: clock)
    try await clock.waitForPendingWork()
    #expect(delayed.isPending)
    clock.advance(by: .seconds(1))
    await #expect(throws: Kit.Failure(4)) { try await delayed.value }
  }

  @Test("the clock starts when the source settles, not when delay is called")
  func clockStartsAtSettlement() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver) = Promise<Int>.pending()
    let delayed = source.delay(.seconds(2), scheduler: clock)
    clock.advance(by: .seconds(5))
    #expect(clock.pendingCount == 0)
    resolver.fulfill(1)
    try await clock.waitForPendingWork()
    #expect(clock.nextDeadline == .seconds(7))
    clock.advance(by: .seconds(2))
    #expect(try await delayed.value == 1)
  }

  @Test("the timer's work runs on the given queue; chained callbacks on theirs")
  func queues() async throws {
    let clock = VirtualTimeScheduler()
    let timerQueue = DispatchQueue(label: "delay.timer")
    let callbackQueue = DispatchQueue(label: "delay.callback")
    let recording = Kit.RecordingScheduler(clock)
    let chained = Promise(1).delay(.seconds(1), on: timerQueue, scheduler: recording)
      .map(on: callbackQueue) { value -> Int in
        dispatchPrecondition(condition: .onQueue(callbackQueue))
        return value + 1
      }
    try await clock.waitForPendingWork()
    #expect(recording.requestedQueues.first === timerQueue)
    clock.advance(by: .seconds(1))
    #expect(try await chained.value == 2)
  }

  @Test("cancelling the delayed promise cancels its timer")
  func cancellingCancelsTimer() async throws {
    let clock = VirtualTimeScheduler()
    let delayed = Promise(1).delay(.seconds(1), scheduler: clock)
    try await clock.waitForPendingWork()
    delayed.cancel()
    #expect(clock.pendingCount == 0)
    await #expect(throws: CancellationError.self) { try await delayed.value }
  }

  @Test("cancelling before the source settles cancels the source when nothing else waits on it")
  func cancellingCancelsSoleObservedSource() async throws {
    let clock = VirtualTimeScheduler()
    let cancellations = Kit.Locked(0)
    let (source, resolver) = Promise<Int>.pending()
    resolver.onCancel { cancellations.withValue { $0 += 1 } }
    let delayed = source.delay(.seconds(1), scheduler: clock)
    delayed.cancel()
    #expect(cancellations.value == 1)
    #expect(source.isRejected)
    #expect(clock.pendingCount == 0)
  }

  @Test("cancelling spares a source that others observe")
  func cancellingSparesSharedSource() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver) = Promise<Int>.pending()
    let other = source.map { $0 + 1 }
    let delayed = source.delay(.seconds(1), scheduler: clock)
    delayed.cancel()
    #expect(source.isPending)
    resolver.fulfill(1)
    #expect(try await other.value == 2)
    #expect(clock.pendingCount == 0)
  }

  @Test("nothing is retained after the delayed promise settles")
  func nothingRetained() async throws {
    let clock = VirtualTimeScheduler()
    let weakValue: Kit.Weak
    var delayed: Promise<Kit.Canary>?
    do {
      let canary = Kit.Canary()
      weakValue = Kit.Weak(canary)
      delayed = Promise(canary).delay(.seconds(1), scheduler: clock)
    }
    let weakDelayed = Kit.Weak(delayed)
    try await clock.waitForPendingWork()
    clock.advance(by: .seconds(1))
    #expect(try await delayed!.value.name == "canary")
    delayed = nil
    #expect(await Kit.eventually { weakDelayed.isReleased && weakValue.isReleased })
  }

  @Test("a cancelled delay over a pending shared source is not retained by it")
  func cancelledDelayNotRetainedBySharedSource() async throws {
    let clock = VirtualTimeScheduler()
    let (source, resolver) = Promise<Int>.pending()
    source.whenSettled { _ in }
    var delayed: Promise<Int>? = source.delay(.seconds(1), scheduler: clock)
    let weakDelayed = Kit.Weak(delayed)
    delayed!.cancel()
    delayed = nil
    #expect(await Kit.eventually { weakDelayed.isReleased })
    resolver.fulfill(1)
  }

  @Test("Promise.after is fulfilled exactly when its time has passed")
  func afterFulfilsAtDeadline() async throws {
    let clock = VirtualTimeScheduler()
    let waited = Promise.after(.milliseconds(1500), scheduler: clock)
    #expect(clock.pendingCount == 1)
    clock.advance(by: .milliseconds(1499))
    #expect(waited.isPending)
    clock.advance(by: .milliseconds(1))
    try await waited.value
  }

  @Test("cancelling Promise.after removes its timer")
  func cancellingAfter() async throws {
    let clock = VirtualTimeScheduler()
    let waited = Promise.after(.seconds(1), scheduler: clock)
    waited.cancel()
    #expect(clock.pendingCount == 0)
    await #expect(throws: CancellationError.self) { try await waited.value }
  }

  @Test("real time: delay passes the outcome on after its source settles, and after fires")
  func realTimeOrdering() async throws {
    let order = Kit.Locked<[String]>([])
    let queue = DispatchQueue(label: "delay.real")
    let (source, resolver) = Promise<String>.pending()
    let delayed = source.delay(.milliseconds(5), scheduler: DispatchTimeScheduler())
      .map(on: queue) { value -> String in
        order.withValue { $0.append("delayed") }
        return value
      }
    #expect(delayed.isPending)  // the source has not settled: no clock is running yet
    order.withValue { $0.append("source") }
    resolver.fulfill("value")
    #expect(try await delayed.value == "value")
    try await Promise.after(.milliseconds(5), scheduler: DispatchTimeScheduler()).value
    #expect(order.value == ["source", "delayed"])
  }
}
