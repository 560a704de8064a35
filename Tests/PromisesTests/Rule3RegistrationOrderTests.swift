import Dispatch
import Foundation
import Testing

@testable import Promises

/// Rule 3: callbacks registered on one promise run in registration order.
///
/// What "order" means depends on the queue (see `CallbackQueueKind`):
/// - on a serial queue the callbacks of one promise *run* in registration order;
/// - on a concurrent queue they are *submitted* in registration order, but the queue may run
///   two submitted blocks at once, so the tests check only that each runs exactly once;
/// - a concurrent queue that targets a serial queue runs blocks in submission order, which
///   makes the submission order observable: there the full order is checked.
@Suite("Rule 3: callbacks of one promise run in registration order", .timeLimit(.minutes(1)))
struct Rule3RegistrationOrderTests {
  /// Checks `order` against `0..<count`: exact order where the queue keeps it, else as a set.
  private func expectOrder(
    _ order: [Int], count: Int, on kind: CallbackQueueKind, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    if kind.runsInSubmissionOrder {
      #expect(order == Array(0..<count), sourceLocation: sourceLocation)
    } else {
      #expect(order.count == count, sourceLocation: sourceLocation)
      #expect(Set(order) == Set(0..<count), sourceLocation: sourceLocation)
    }
  }

  @Test(arguments: CallbackQueueKind.allCases)
  func manyCallbacksRegisteredBeforeSettlementRunInOrder(kind: CallbackQueueKind) async throws {
    let queue = kind.makeQueue()
    let (promise, resolver) = Promise<Int>.pending()
    let order = Guarded<[Int]>([])
    let links = (0..<500).map { index in promise.map(on: queue) { _ in order.append(index) } }
    resolver.fulfill(0)
    for link in links { try await link.value }
    expectOrder(order.value, count: 500, on: kind)
  }

  @Test(arguments: CallbackQueueKind.allCases)
  func manyCallbacksRegisteredAfterSettlementRunInOrder(kind: CallbackQueueKind) async throws {
    let queue = kind.makeQueue()
    let promise = Promise(0)
    let order = Guarded<[Int]>([])
    let links = (0..<500).map { index in promise.map(on: queue) { _ in order.append(index) } }
    for link in links { try await link.value }
    expectOrder(order.value, count: 500, on: kind)
  }

  @Test(arguments: CallbackQueueKind.allCases)
  func callbacksRegisteredBeforeAndAfterSettlementRunInOrder(kind: CallbackQueueKind) async throws {
    // The "already settled must be dispatched" trap: callbacks registered before settlement are
    // already queued; one registered after settlement must not overtake them.
    let queue = kind.makeQueue()
    let (promise, resolver) = Promise<Int>.pending()
    let order = Guarded<[Int]>([])
    var links = (0..<100).map { index in promise.map(on: queue) { _ in order.append(index) } }
    resolver.fulfill(0)
    links += (100..<200).map { index in promise.map(on: queue) { _ in order.append(index) } }
    for link in links { try await link.value }
    expectOrder(order.value, count: 200, on: kind)
  }

  @Test(arguments: CallbackQueueKind.allCases)
  func aCallbackRegisteredFromTheQueueAfterSettlementDoesNotOvertakeQueuedOnes(
    kind: CallbackQueueKind
  ) async throws {
    // The promise settles on another thread while `queue` is busy running a callback; that
    // callback then registers on the settled promise. The earlier callbacks are queued behind
    // the busy block; the late one must be queued behind them, not run inside the busy drain.
    let queue = kind.makeQueue()
    let (promise, resolver) = Promise<Int>.pending()
    let (settled, settledResolver) = Promise<Void>.pending()
    let order = Guarded<[Int]>([])
    let early = (0..<3).map { index in promise.map(on: queue) { _ in order.append(index) } }
    let late = Guarded<[Promise<Void>]>([])
    let busy = Promise(()).map(on: queue) { _ in
      // Blocks `queue` until the test thread has fulfilled `promise` (bounded).
      _ = try? settled.wait(timeout: 50)
      late.value = (3..<6).map { index in promise.map(on: queue) { _ in order.append(index) } }
    }
    // Let `busy` start, so `queue` is occupied when the promise settles.
    await yieldUntil { callbacksWaiting(on: settled) == 1 }
    resolver.fulfill(0)
    settledResolver.fulfill()
    try await busy.value
    for link in early + late.value { try await link.value }
    expectOrder(order.value, count: 6, on: kind)
  }

  @Test func callbacksForDifferentQueuesKeepTheOrderPerQueue() async throws {
    let first = DispatchQueue(label: "tests.order.1")
    let second = DispatchQueue(label: "tests.order.2")
    let (promise, resolver) = Promise<Int>.pending()
    let firstOrder = Guarded<[Int]>([])
    let secondOrder = Guarded<[Int]>([])
    var links: [Promise<Void>] = []
    for index in 0..<200 {
      if index.isMultiple(of: 3) {
        links.append(promise.map(on: second) { _ in secondOrder.append(index) })
      } else {
        links.append(promise.map(on: first) { _ in firstOrder.append(index) })
      }
      if index == 100 { resolver.fulfill(0) }
    }
    for link in links { try await link.value }
    #expect(firstOrder.value == (0..<200).filter { !$0.isMultiple(of: 3) })
    #expect(secondOrder.value == (0..<200).filter { $0.isMultiple(of: 3) })
  }

  @Test func mixedCallbackKindsRunInRegistrationOrder() async throws {
    let queue = DispatchQueue(label: "tests.mixed")
    let (promise, resolver) = Promise<Int>.pending()
    let order = Guarded<[Int]>([])
    let links: [Promise<Int>] = [
      promise.map(on: queue) { value -> Int in
        order.append(0)
        return value
      },
      promise.always(on: queue) { order.append(1) },
      promise.whenSettled(on: queue) { _ in order.append(2) },
      promise.then(on: queue) { value -> Promise<Int> in
        order.append(3)
        return Promise(value)
      },
      promise.validate(on: queue) { _ in
        order.append(4)
        return true
      },
      promise.recover(on: queue) { _ in 0 }.always(on: queue) { order.append(5) },
    ]
    resolver.fulfill(1)
    _ = try await Promise.all(links).value
    #expect(order.value == [0, 1, 2, 3, 4, 5])
  }

  @Test func aLongChainDrainingOnAQueueDoesNotLetLateCallbacksOvertakeEarlyOnes() async throws {
    // While a chain drains on `queue`, another thread registers on links that have already
    // settled. On each link, the callback registered first (the next link, or an earlier
    // observer) must run before the later one.
    let queue = DispatchQueue(label: "tests.drain")
    let (head, resolver) = Promise<Int>.pending()
    let length = 20_000
    var links: [Promise<Int>] = []
    links.reserveCapacity(length)
    var tail = head
    for _ in 0..<length {
      tail = tail.map(on: queue) { $0 + 1 }
      links.append(tail)
    }
    let events = Guarded<[String]>([])
    // An observer registered before settlement on every 100th link.
    let early = stride(from: 0, to: length, by: 100).map { index in
      links[index].map(on: queue) { value -> Int in
        events.withLock { $0.append("early \(index)") }
        return value
      }
    }
    let allLinks = links
    let lateObservers = Guarded<[Promise<Int>]>([])
    let registrar = Thread {
      // Registers late observers on links as they settle, racing with the drain.
      var index = 0
      while index < length {
        let link = allLinks[index]
        let tag = "late \(index)"
        let observer = link.map(on: queue) { value -> Int in
          events.withLock { $0.append(tag) }
          return value
        }
        lateObservers.withLock { $0.append(observer) }
        index += 100
      }
    }
    registrar.start()
    resolver.fulfill(0)
    #expect(try await tail.value == length)
    await yieldUntil { lateObservers.value.count == length / 100 }
    for observer in early + lateObservers.value { _ = try await observer.value }
    let recorded = events.value
    for index in stride(from: 0, to: length, by: 100) {
      let earlyPosition = recorded.firstIndex(of: "early \(index)")
      let latePosition = recorded.firstIndex(of: "late \(index)")
      #expect(earlyPosition != nil && latePosition != nil)
      if let earlyPosition, let latePosition {
        #expect(earlyPosition < latePosition, "link \(index): a late observer overtook an early one")
      }
    }
  }

  @Test func callbacksRegisteredFromManyThreadsBeforeSettlementRunInTheirRegistrationOrder()
    async throws
  {
    // Registration order across threads is the order the promise's lock took them in; each
    // thread's own registrations must keep their relative order.
    let queue = DispatchQueue(label: "tests.threads")
    let (promise, resolver) = Promise<Int>.pending()
    let order = Guarded<[Int]>([])
    let links = Guarded<[Promise<Void>]>([])
    let finished = await runOnThreads(4) { thread in
      for step in 0..<100 {
        let tag = thread * 1_000 + step
        let link = promise.map(on: queue) { _ in order.append(tag) }
        links.withLock { $0.append(link) }
      }
    }
    #expect(finished)
    resolver.fulfill(0)
    for link in links.value { try await link.value }
    let recorded = order.value
    #expect(recorded.count == 400)
    for thread in 0..<4 {
      let mine = recorded.filter { $0 / 1_000 == thread }
      #expect(mine == (0..<100).map { thread * 1_000 + $0 })
    }
  }

  @Test func aCallbackRegisteredAsThePromiseSettlesRunsAfterTheCallbacksRegisteredBefore()
    async throws
  {
    // A queue callback registered on a fulfilled promise takes no lock: it must still queue
    // behind the callbacks that the settlement is placing at that moment, on two queues (the
    // settlement places them in order, one outbox after the other).
    let queues = [DispatchQueue(label: "tests.settle-race.a"), DispatchQueue(label: "tests.settle-race.b")]
    for _ in 0..<100 {
      let (promise, resolver) = Promise<Int>.pending()
      let events = Guarded<[String]>([])
      let links = Guarded<[Promise<Void>]>([])
      for index in 0..<16 {
        let queue = queues[index % 2]
        let link = promise.map(on: queue) { _ in events.withLock { $0.append("early \(queue.label)") } }
        links.withLock { $0.append(link) }
      }
      let finished = await runOnThreads(2) { thread in
        if thread == 0 {
          resolver.fulfill(1)
          return
        }
        for index in 0..<64 {
          let queue = queues[index % 2]
          let link = promise.map(on: queue) { _ in events.withLock { $0.append("late \(queue.label)") } }
          links.withLock { $0.append(link) }
        }
      }
      #expect(finished)
      for link in links.value { try await link.value }
      for queue in queues {
        let mine = events.value.filter { $0.hasSuffix(queue.label) }
        #expect(mine.count == 40)
        let firstLate = mine.firstIndex { $0.hasPrefix("late") } ?? mine.count
        #expect(firstLate == 8, "a late callback overtook an early one on \(queue.label): \(mine)")
      }
    }
  }
}
