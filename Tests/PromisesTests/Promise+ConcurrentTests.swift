import Dispatch
import Foundation
import Promises
import Testing

private typealias Kit = CombinatorTestKit

/// Factories whose promises the test settles by hand, reporting each start on a stream.
private final class ManualWork: Sendable {
  struct Start: Sendable {
    let index: Int
    let resolver: Promise<Int>.Resolver
    let promise: Promise<Int>
  }

  let starts: AsyncStream<Start>
  private let continuation: AsyncStream<Start>.Continuation
  let running = Kit.Locked(0)
  let maxRunning = Kit.Locked(0)
  let calls = Kit.Locked<[Int]>([])
  let cancellations = Kit.Locked<[Int]>([])

  init() {
    (starts, continuation) = AsyncStream.makeStream(of: Start.self)
  }

  func factory(_ index: Int, queue: DispatchQueue) -> @Sendable () throws -> Promise<Int> {
    { [self] in
      dispatchPrecondition(condition: .onQueue(queue))
      calls.withValue { $0.append(index) }
      let now = running.withValue { running in
        running += 1
        return running
      }
      maxRunning.withValue { $0 = max($0, now) }
      let (promise, resolver) = Promise<Int>.pending()
      resolver.onCancel { [self] in cancellations.withValue { $0.append(index) } }
      continuation.yield(Start(index: index, resolver: resolver, promise: promise))
      return promise
    }
  }

  /// Settles a started promise, counting it out of `running` first.
  func settle(_ start: Start, with result: Result<Int, any Error>) {
    running.withValue { $0 -= 1 }
    start.resolver.resolve(result)
  }
}

@Suite("Promise.all(maxConcurrent:) and Promise.map", .timeLimit(.minutes(1)))
struct PromiseConcurrentTests {
  @Test(
    "never more than maxConcurrent run at once, and values keep input order",
    arguments: Kit.QueueKind.allCases, [1, 2, 3, 10])
  func limitAndOrder(kind: CombinatorTestKit.QueueKind, limit: Int) async throws {
    let queue = kind.makeQueue()
    let work = ManualWork()
    let count = 7
    let all = Promise.all(on: queue, maxConcurrent: limit, (0..<count).map { work.factory($0, queue: queue) })
    var iterator = work.starts.makeAsyncIterator()
    var window: [ManualWork.Start] = []
    for _ in 0..<min(limit, count) { window.append(await iterator.next()!) }
    var settled = 0
    while settled < count {
      // Settle the most recently started first, so values arrive out of input order.
      let start = window.removeLast()
      work.settle(start, with: .success(start.index * 10))
      settled += 1
      if settled + window.count < count { window.append(await iterator.next()!) }
    }
    #expect(try await all.value == (0..<count).map { $0 * 10 })
    #expect(work.maxRunning.value == min(limit, count))
    #expect(work.calls.value.count == count)
    if kind == .serial { #expect(work.calls.value == Array(0..<count)) }
  }

  @Test("the first rejection rejects the whole, starts nothing more and cancels the running work")
  func firstRejectionStopsEverything() async throws {
    let queue = DispatchQueue(label: "fanout.reject")
    let work = ManualWork()
    let all = Promise.all(on: queue, maxConcurrent: 3, (0..<6).map { work.factory($0, queue: queue) })
    var iterator = work.starts.makeAsyncIterator()
    var started: [ManualWork.Start] = []
    for _ in 0..<3 { started.append(await iterator.next()!) }
    started.sort { $0.index < $1.index }
    // Input 0 is also observed elsewhere: it must survive the cancellation.
    let observer = started[0].promise.map { $0 }
    work.settle(started[2], with: .failure(Kit.Failure(2)))
    await #expect(throws: Kit.Failure(2)) { try await all.value }
    await Kit.flush(queue)
    #expect(work.calls.value.count == 3)
    #expect(work.cancellations.value == [1])
    #expect(started[0].promise.isPending)
    work.settle(started[0], with: .success(0))
    #expect(try await observer.value == 0)
  }

  @Test("a throwing factory rejects the whole")
  func throwingFactory() async throws {
    let factories: [@Sendable () throws -> Promise<Int>] = [
      { Promise(1) }, { throw Kit.Failure(9) }, { Promise(3) },
    ]
    await #expect(throws: Kit.Failure(9)) { try await Promise.all(maxConcurrent: 1, factories).value }
  }

  @Test("cancelling the result cancels the running work and starts nothing more")
  func cancellingStopsEverything() async throws {
    let queue = DispatchQueue(label: "fanout.cancel")
    let work = ManualWork()
    let all = Promise.all(on: queue, maxConcurrent: 2, (0..<5).map { work.factory($0, queue: queue) })
    var iterator = work.starts.makeAsyncIterator()
    let first = await iterator.next()!
    let second = await iterator.next()!
    await Kit.flush(queue)
    all.cancel()
    await #expect(throws: CancellationError.self) { try await all.value }
    #expect(Set(work.cancellations.value) == [first.index, second.index])
    await Kit.flush(queue)
    #expect(work.calls.value.count == 2)
  }

  @Test("an empty input gives an empty array")
  func emptyInput() async throws {
    #expect(try await Promise<Int>.all(maxConcurrent: 3, []).value == [])
    #expect(try await Promise<Int>.map([Int](), maxConcurrent: 1) { Promise($0) }.value == [])
  }

  @Test(
    "map transforms every input on the given queue, keeping input order", arguments: Kit.QueueKind.allCases)
  func mapKeepsOrder(kind: CombinatorTestKit.QueueKind) async throws {
    let queue = kind.makeQueue()
    let running = Kit.Locked(0)
    let maxRunning = Kit.Locked(0)
    let mapped = Promise.map(on: queue, Array(1...20), maxConcurrent: 4) { number -> Promise<String> in
      dispatchPrecondition(condition: .onQueue(queue))
      let now = running.withValue { running in
        running += 1
        return running
      }
      maxRunning.withValue { $0 = max($0, now) }
      return Promise(number).map(on: .global()) { value -> String in
        running.withValue { $0 -= 1 }
        return "#\(value)"
      }
    }
    #expect(try await mapped.value == (1...20).map { "#\($0)" })
    #expect(maxRunning.value <= 4)
  }

  @Test("nothing is retained after the result settles")
  func nothingRetained() async throws {
    var canary: Kit.Canary? = Kit.Canary()
    let weakCanary = Kit.Weak(canary)
    var all: Promise<[Int]>? = Promise.all(
      maxConcurrent: 2,
      (0..<5).map { index -> @Sendable () throws -> Promise<Int> in
        { [canary] in
          _ = canary
          return Promise(index)
        }
      })
    canary = nil
    let weakAll = Kit.Weak(all)
    #expect(try await all!.value == [0, 1, 2, 3, 4])
    all = nil
    #expect(await Kit.eventually { weakCanary.isReleased && weakAll.isReleased })
  }

  @Test("maxConcurrent below one is a precondition failure", .tags(.childProcess))
  func maxConcurrentMustBePositive() async {
    await #expect(processExitsWith: .failure) {
      _ = Promise<Int>.all(maxConcurrent: 0, [])
    }
  }
}
