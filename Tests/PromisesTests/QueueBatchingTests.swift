import Dispatch
import Foundation
import Testing

@testable import Promises

/// Callbacks ready for one queue share one dispatched block (the queue's outbox, see `Drain`).
///
/// Each claim of Docs/Queues.md ("Promise callbacks and your own blocks") has a test here.
/// Tests that need a deterministic interleaving hold the queue with a gate block: a block that
/// waits on a semaphore, so everything enqueued meanwhile lines up behind it.
@Suite("Queue batching", .timeLimit(.minutes(1)))
struct QueueBatchingTests {
  /// Enqueues a block that holds `queue` until the returned gate is opened.
  private func closeGate(on queue: DispatchQueue) -> Gate {
    let gate = Gate()
    queue.async { gate.waitUntilOpen() }
    return gate
  }

  @Test func aThousandCallbacksOnASettledPromiseRunInRegistrationOrderAcrossBatches() async throws {
    let queue = DispatchQueue(label: "tests.batching.order")
    let promise = Promise(0)
    let order = Guarded<[Int]>([])
    let links = (0..<1_000).map { index in promise.map(on: queue) { _ in order.append(index) } }
    for link in links { try await link.value }
    #expect(order.value == Array(0..<1_000))
  }

  @Test func callbacksBeforeAndAfterSettlementKeepTheirOrderAcrossBatches() async throws {
    // 1,000 callbacks wait when the promise settles; 1,000 more are registered on it while the
    // first batches run (each batch holds at most `Drain.batchLimit`).
    let queue = DispatchQueue(label: "tests.batching.before-after")
    let (promise, resolver) = Promise<Int>.pending()
    let order = Guarded<[Int]>([])
    var links = (0..<1_000).map { index in promise.map(on: queue) { _ in order.append(index) } }
    resolver.fulfill(0)
    links += (1_000..<2_000).map { index in promise.map(on: queue) { _ in order.append(index) } }
    for link in links { try await link.value }
    #expect(order.value == Array(0..<2_000))
  }

  @Test func aRegistrationRacingTheSettlementDoesNotOvertakeEarlierCallbacks() async throws {
    // The settling thread has many callbacks for two other queues to schedule before the last
    // one, for `queue`; another thread registers on `queue` as soon as it sees the promise
    // settled. That late callback must still run after the earlier one.
    let rounds = isThreadSanitizerActive ? 20 : 200
    let queue = DispatchQueue(label: "tests.batching.race")
    let others = [
      DispatchQueue(label: "tests.batching.race.a"), DispatchQueue(label: "tests.batching.race.b"),
    ]
    var overtaken = 0
    for _ in 0..<rounds {
      let (promise, resolver) = Promise<Int>.pending()
      let order = Guarded<[Int]>([])
      let fillers = (0..<200).map { index in promise.map(on: others[index % 2]) { _ in } }
      let early = promise.map(on: queue) { _ in order.append(0) }
      let late = Guarded<Promise<Void>?>(nil)
      let registered = await runOnThreads(2) { thread in
        if thread == 0 {
          resolver.fulfill(1)
        } else {
          while promise.isPending {}
          late.value = promise.map(on: queue) { _ in order.append(1) }
        }
      }
      try #require(registered)
      _ = try early.wait(timeout: 10)
      _ = try #require(late.value).wait(timeout: 10)
      for filler in fillers { _ = try filler.wait(timeout: 10) }
      if order.value != [0, 1] { overtaken += 1 }
    }
    #expect(overtaken == 0, "the late callback ran first in \(overtaken) of \(rounds) rounds")
  }

  @Test func noCallbackRunsInsideTheCallThatRegisteredIt() async throws {
    let queue = DispatchQueue(label: "tests.batching.never-inline")
    let promise = Promise(1)
    let ranInside = Guarded(0)
    // From outside any queue, and from a callback running on `queue` itself (a drain is active
    // there, and other callbacks for `queue` are waiting in its outbox). A callback ran inside
    // the call if it ran on the registering thread before that `then` returned (on another
    // thread it may start at once, which is fine).
    var links: [Promise<Void>] = []
    for _ in 0..<200 {
      let registrant = pthread_self()
      let registering = Guarded(true)
      links.append(
        promise.map(on: queue) { _ -> Void in
          if registering.value && pthread_equal(pthread_self(), registrant) != 0 { ranInside.increment() }
        })
      registering.value = false
    }
    let nested = promise.then(on: queue) { _ -> Promise<Int> in
      let flag = Guarded(true)
      let inner = promise.map(on: queue) { value -> Int in
        #expect(!flag.value, "ran inside the `then` that registered it")
        return value
      }
      flag.value = false
      return inner
    }
    for link in links { try await link.value }
    #expect(try await nested.value == 1)
    #expect(ranInside.value == 0)
  }

  @Test func aBlockEnqueuedBehindTenThousandCallbacksRunsAfterAtMostOneBatch() throws {
    let queue = DispatchQueue(label: "tests.batching.starvation")
    let gate = closeGate(on: queue)
    let promise = Promise(0)
    let ran = Guarded(0)
    let links = (0..<10_000).map { _ in promise.map(on: queue) { _ in ran.withLock { $0 += 1 } } }
    let seenByBlock = Guarded<Int?>(nil)
    let blockRan = DispatchSemaphore(value: 0)
    queue.async {
      seenByBlock.value = ran.value
      blockRan.signal()
    }
    gate.open()
    try #require(blockRan.wait(timeout: .now() + 30) == .success)
    for link in links { _ = try link.wait(timeout: 30) }
    let seen = try #require(seenByBlock.value)
    #expect(seen <= Drain.batchLimit)
    #expect(seen < 10_000)
    #expect(ran.value == 10_000)
  }

  @Test func theTestsDrainQueueWaitsForEveryBatch() async {
    // The queue holds, in order: the gate, the outbox's block, drainQueue's barrier. Opened,
    // the block runs one batch and sends the rest behind the barrier; one barrier is not enough.
    let queue = DispatchQueue(label: "tests.batching.drain-helper")
    let gate = closeGate(on: queue)
    let promise = Promise(0)
    let ran = Guarded(0)
    let links = (0..<(3 * Drain.batchLimit)).map { _ in
      promise.map(on: queue) { _ in ran.withLock { $0 += 1 } }
    }
    let ranAtLastBarrier = Guarded(0)
    await drainQueue(
      queue, onceEnqueued: { gate.open() }, inBarrier: { ranAtLastBarrier.value = ran.value })
    #expect(ranAtLastBarrier.value == links.count)
  }

  @Test func aCallbackRegisteredWhileNothingWaitsForTheQueueRunsBeforeALaterBlock() throws {
    let queue = DispatchQueue(label: "tests.batching.idle")
    let promise = Promise(0)
    for round in 0..<100 {
      let order = Guarded<[String]>([])
      let link = promise.map(on: queue) { _ in order.withLock { $0.append("callback") } }
      let done = DispatchSemaphore(value: 0)
      queue.async {
        order.withLock { $0.append("block") }
        done.signal()
      }
      try #require(done.wait(timeout: .now() + 10) == .success)
      _ = try link.wait(timeout: 10)
      #expect(order.value == ["callback", "block"], "round \(round)")
    }
  }

  @Test func aCallbackRegisteredAfterYourBlockMayRunBeforeIt() throws {
    // It joins the batch that is already queued ahead of the block.
    let queue = DispatchQueue(label: "tests.batching.joins")
    let gate = closeGate(on: queue)
    let promise = Promise(0)
    let order = Guarded<[String]>([])
    let first = promise.map(on: queue) { _ in order.withLock { $0.append("first") } }
    queue.async { order.withLock { $0.append("block") } }
    let second = promise.map(on: queue) { _ in order.withLock { $0.append("second") } }
    gate.open()
    _ = try first.wait(timeout: 10)
    _ = try second.wait(timeout: 10)
    try drainSynchronously(queue)
    #expect(order.value == ["first", "second", "block"])
  }

  @Test func aCallbackRegisteredBeforeYourBlockMayRunAfterIt() throws {
    // More than one batch was waiting: the rest of the callbacks run behind the block.
    let queue = DispatchQueue(label: "tests.batching.behind")
    let gate = closeGate(on: queue)
    let promise = Promise(0)
    let order = Guarded<[Int]>([])
    let count = Drain.batchLimit + 10
    let links = (0..<count).map { index in promise.map(on: queue) { _ in order.append(index) } }
    queue.async { order.append(-1) }
    gate.open()
    for link in links { _ = try link.wait(timeout: 10) }
    try drainSynchronously(queue)
    let expected = Array(0..<Drain.batchLimit) + [-1] + Array(Drain.batchLimit..<count)
    #expect(order.value == expected)
  }

  @Test func mainQueueCallbacksReadThroughDifferentQueueObjectsKeepTheirOrder() async throws {
    // On Linux every read of `DispatchQueue.main` returns a new object; they share one outbox.
    let promise = Promise(0)
    let order = Guarded<[Int]>([])
    let links = (0..<300).map { index in
      promise.map(on: .main) { _ in
        dispatchPrecondition(condition: .onQueue(.main))
        order.append(index)
      }
    }
    for link in links { try await link.value }
    #expect(order.value == Array(0..<300))
  }

  @Test func callbacksOnAGlobalQueueStillRunInParallel() throws {
    // Global queues have no outbox: two callbacks that wait for each other both finish.
    let promise = Promise(0)
    let first = DispatchSemaphore(value: 0)
    let second = DispatchSemaphore(value: 0)
    let a = promise.map(on: .global()) { _ -> Bool in
      first.signal()
      return second.wait(timeout: .now() + 10) == .success
    }
    let b = promise.map(on: .global()) { _ -> Bool in
      second.signal()
      return first.wait(timeout: .now() + 10) == .success
    }
    #expect(try a.wait(timeout: 20))
    #expect(try b.wait(timeout: 20))
  }

  @Test func queueSpecificValuesOfTheUserAreUntouched() async throws {
    let queue = DispatchQueue(label: "tests.batching.specific")
    let key = DispatchSpecificKey<String>()
    queue.setSpecific(key: key, value: "mine")
    let seen = try await Promise(0).map(on: queue) { _ in DispatchQueue.getSpecific(key: key) }.value
    #expect(seen == "mine")
    #expect(queue.getSpecific(key: key) == "mine")
  }
}

/// Holds a queue: the gate block waits until `open()`.
private final class Gate: Sendable {
  private let semaphore = DispatchSemaphore(value: 0)

  func waitUntilOpen() {
    _ = semaphore.wait(timeout: .now() + 30)
  }

  func open() {
    semaphore.signal()
  }
}

/// Waits until every block enqueued on the serial `queue` before this call has run.
private func drainSynchronously(_ queue: DispatchQueue) throws {
  let done = DispatchSemaphore(value: 0)
  queue.async { done.signal() }
  try #require(done.wait(timeout: .now() + 10) == .success)
}
