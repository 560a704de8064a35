import Dispatch
import Foundation
import Promises
import Testing

private typealias Kit = CombinatorTestKit

@Suite("VirtualTimeScheduler", .timeLimit(.minutes(1)))
struct VirtualTimeSchedulerTests {
  @Test("work runs only when the clock reaches its deadline")
  func workRunsAtDeadline() {
    let clock = VirtualTimeScheduler()
    let ran = Kit.Locked(0)
    clock.schedule(after: .seconds(2), on: .global()) { ran.withValue { $0 += 1 } }
    #expect(clock.pendingCount == 1)
    #expect(clock.nextDeadline == .seconds(2))
    #expect(clock.advance(by: .seconds(2) - .nanoseconds(1)) == 0)
    #expect(ran.value == 0)
    #expect(clock.advance(by: .nanoseconds(1)) == 1)
    #expect(ran.value == 1)
    #expect(clock.pendingCount == 0)
    #expect(clock.nextDeadline == nil)
    #expect(clock.now == .seconds(2))
  }

  @Test("work due at the same instant runs in scheduling order, earlier deadlines first")
  func sameInstantRunsInSchedulingOrder() {
    let clock = VirtualTimeScheduler()
    let order = Kit.Locked<[String]>([])
    let serial = DispatchQueue(label: "virtual.a")
    let other = DispatchQueue(label: "virtual.b", attributes: .concurrent)
    clock.schedule(after: .seconds(1), on: serial) { order.withValue { $0.append("1a") } }
    clock.schedule(after: .seconds(1), on: other) { order.withValue { $0.append("1b") } }
    clock.schedule(after: .milliseconds(500), on: other) { order.withValue { $0.append("0.5") } }
    clock.schedule(after: .seconds(1), on: serial) { order.withValue { $0.append("1c") } }
    #expect(clock.advance(to: .seconds(1)) == 4)
    #expect(order.value == ["0.5", "1a", "1b", "1c"])
  }

  @Test("due work runs on its queue, and advance returns after it has run")
  func dueWorkRunsOnItsQueue() {
    let clock = VirtualTimeScheduler()
    let queue = DispatchQueue(label: "virtual.queue")
    let ran = Kit.Locked(false)
    clock.schedule(after: .seconds(1), on: queue) {
      dispatchPrecondition(condition: .onQueue(queue))
      ran.withValue { $0 = true }
    }
    clock.advance(by: .seconds(1))
    #expect(ran.value)
  }

  @Test("now reads the deadline of the running item, then the target")
  func nowDuringAndAfterAdvance() {
    let clock = VirtualTimeScheduler()
    let seen = Kit.Locked<[Duration]>([])
    clock.schedule(after: .seconds(1), on: .global()) { seen.withValue { $0.append(clock.now) } }
    clock.schedule(after: .seconds(3), on: .global()) { seen.withValue { $0.append(clock.now) } }
    clock.advance(to: .seconds(10))
    #expect(seen.value == [.seconds(1), .seconds(3)])
    #expect(clock.now == .seconds(10))
  }

  @Test("work scheduled by due work runs in the same advance when it falls due in time")
  func nestedWorkRunsWhenDue() {
    let clock = VirtualTimeScheduler()
    let order = Kit.Locked<[Duration]>([])
    clock.schedule(after: .seconds(1), on: .global()) {
      order.withValue { $0.append(clock.now) }
      clock.schedule(after: .seconds(1), on: .global()) { order.withValue { $0.append(clock.now) } }
      clock.schedule(after: .seconds(5), on: .global()) { order.withValue { $0.append(clock.now) } }
    }
    #expect(clock.advance(to: .seconds(3)) == 2)
    #expect(order.value == [.seconds(1), .seconds(2)])
    #expect(clock.pendingCount == 1)
    #expect(clock.nextDeadline == .seconds(6))
    // Run the last item too: its closure holds the clock, which holds it while it waits.
    #expect(clock.advance(to: .seconds(6)) == 1)
    #expect(order.value == [.seconds(1), .seconds(2), .seconds(6)])
  }

  @Test("cancelling removes the work, lowers pendingCount and releases the closure")
  func cancellingRemovesWork() {
    let clock = VirtualTimeScheduler()
    var canary: Kit.Canary? = Kit.Canary()
    let weak = Kit.Weak(canary)
    let ran = Kit.Locked(false)
    let work = clock.schedule(after: .seconds(1), on: .global()) { [canary] in
      _ = canary
      ran.withValue { $0 = true }
    }
    canary = nil
    #expect(clock.pendingCount == 1)
    work.cancel()
    #expect(clock.pendingCount == 0)
    #expect(weak.isReleased)
    #expect(clock.advance(by: .seconds(5)) == 0)
    #expect(!ran.value)
    work.cancel()
  }

  @Test("runUntilIdle runs everything in deadline order and moves the clock to the last deadline")
  func runUntilIdleRunsEverything() {
    let clock = VirtualTimeScheduler()
    let order = Kit.Locked<[Int]>([])
    clock.schedule(after: .seconds(30), on: .global()) { order.withValue { $0.append(3) } }
    clock.schedule(after: .seconds(10), on: .global()) {
      order.withValue { $0.append(1) }
      clock.schedule(after: .seconds(5), on: .global()) { order.withValue { $0.append(2) } }
    }
    #expect(clock.runUntilIdle() == 3)
    #expect(order.value == [1, 2, 3])
    #expect(clock.now == .seconds(30))
    #expect(clock.pendingCount == 0)
  }

  @Test("advancing from the queue the work needs runs it inline instead of deadlocking")
  func advancingFromTheWorkQueueRunsInline() {
    let clock = VirtualTimeScheduler()
    let queue = DispatchQueue(label: "virtual.inline")
    let ran = Kit.Locked(false)
    clock.schedule(after: .seconds(1), on: queue) { ran.withValue { $0 = true } }
    queue.sync { _ = clock.advance(by: .seconds(1)) }
    #expect(ran.value)
  }

  @Test("waitForPendingWork returns once enough work has been scheduled elsewhere")
  func waitForPendingWorkReturns() async throws {
    let clock = VirtualTimeScheduler()
    DispatchQueue.global().async {
      clock.schedule(after: .seconds(1), on: .global()) {}
      clock.schedule(after: .seconds(2), on: .global()) {}
    }
    try await clock.waitForPendingWork(count: 2)
    #expect(clock.pendingCount == 2)
    try await clock.waitForPendingWork()  // already satisfied: returns at once
  }

  @Test("waitForPendingWork throws CancellationError when its task is cancelled")
  func waitForPendingWorkIsCancellable() async {
    let clock = VirtualTimeScheduler()
    let task = Task { try await clock.waitForPendingWork() }
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
  }

  @Test("releasing the scheduler drops its pending work, and promises waiting on it break")
  func releasingTheSchedulerBreaksWaitingPromises() async {
    var clock: VirtualTimeScheduler? = VirtualTimeScheduler()
    let waited = Promise.after(.seconds(1), scheduler: clock!)
    let (source, resolver) = Promise<Int>.pending()
    let delayed = source.delay(.seconds(1), scheduler: clock!)
    resolver.fulfill(1)
    try? await clock!.waitForPendingWork(count: 2)
    clock = nil
    await #expect(throws: PromiseError.brokenPromise(createdAt: waited.creationSite)) {
      try await waited.value
    }
    await #expect(throws: PromiseError.brokenPromise(createdAt: delayed.creationSite)) {
      try await delayed.value
    }
  }

  @Test("the documented example works")
  func documentedExample() async {
    let (slow, resolver) = Promise<Int>.pending()
    func slowOperation() -> Promise<Int> { slow }
    // snippet from the VirtualTimeScheduler documentation:
    let clock = VirtualTimeScheduler()
    let result = slowOperation().timeout(.seconds(5), scheduler: clock)
    clock.advance(by: .seconds(5))  // the timeout fires: `result` is rejected with .timedOut
    await #expect(throws: PromiseError.timedOut(after: .seconds(5), createdAt: result.creationSite)) {
      try await result.value
    }
    withExtendedLifetime(resolver) {}
  }
}
