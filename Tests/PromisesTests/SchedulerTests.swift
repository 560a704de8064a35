import Dispatch
import Foundation
import Promises
import Testing

/// Helpers shared by the time and combinator suites (namespaced to avoid clashing with others).
enum CombinatorTestKit {
  /// An error with a payload, so tests can tell attempts and inputs apart.
  struct Failure: Error, Equatable, CustomStringConvertible {
    let code: Int
    init(_ code: Int) { self.code = code }
    var description: String { "Failure(\(code))" }
  }

  /// An object whose release the tests observe through a `Weak` reference.
  final class Canary: Sendable {
    let name: String
    init(_ name: String = "canary") { self.name = name }
  }

  /// A weak reference that can cross concurrency domains.
  final class Weak: @unchecked Sendable {
    // Safety: the runtime makes loads and stores of weak references atomic.
    weak var object: AnyObject?
    init(_ object: AnyObject?) { self.object = object }
    var isReleased: Bool { object == nil }
  }

  /// A lock-protected value, for recording from callbacks on other threads.
  final class Locked<Value: Sendable>: @unchecked Sendable {
    // Safety: `storage` is only accessed while `lock` is held.
    private let lock = NSLock()
    private var storage: Value
    init(_ value: Value) { storage = value }
    var value: Value { lock.withLock { storage } }
    func withValue<Result>(_ body: (inout Value) -> Result) -> Result {
      lock.withLock { body(&storage) }
    }
  }

  /// SplitMix64: a small seeded generator, for reproducible jitter.
  struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
  }

  /// A serial or a concurrent queue, for parameterised tests.
  enum QueueKind: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case serial, concurrent
    func makeQueue() -> DispatchQueue {
      switch self {
      case .serial: DispatchQueue(label: "test.serial")
      case .concurrent: DispatchQueue(label: "test.concurrent", attributes: .concurrent)
      }
    }
    var testDescription: String { rawValue }
  }

  /// A real-time scheduler that records the queues it was asked to use.
  final class RecordingScheduler: PromiseScheduler, @unchecked Sendable {
    // Safety: `queues` is only accessed while `lock` is held; `base` is immutable.
    private let lock = NSLock()
    private var queues: [DispatchQueue] = []
    private let base: any PromiseScheduler

    init(_ base: any PromiseScheduler = DispatchTimeScheduler()) { self.base = base }

    var requestedQueues: [DispatchQueue] { lock.withLock { queues } }

    func schedule(
      after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void
    ) -> any ScheduledWork {
      lock.withLock { queues.append(queue) }
      return base.schedule(after: delay, on: queue, work)
    }
  }

  /// Waits (boundedly) until `condition` holds: for releases that happen on other threads
  /// shortly after a promise settles (a dispatched block or a timer's handler being freed).
  static func eventually(
    within limit: Duration = .seconds(10), _ condition: @Sendable () -> Bool
  ) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + limit
    while !condition() {
      if clock.now >= deadline { return false }
      try? await Task.sleep(for: .milliseconds(1))
    }
    return true
  }

  /// Returns once every block submitted to `queue` so far has run.
  static func flush(_ queue: DispatchQueue) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      queue.async(flags: .barrier) { continuation.resume() }
    }
  }
}

private typealias Kit = CombinatorTestKit

@Suite("DispatchTimeScheduler and the default scheduler", .timeLimit(.minutes(1)))
struct SchedulerTests {
  @Test("work runs on the given queue, never before schedule has returned")
  func workRunsOnQueueAfterScheduleReturns() async throws {
    let queue = DispatchQueue(label: "scheduler.queue")
    let ran = Kit.Locked(false)
    let (done, resolver) = Promise<Void>.pending()
    // While this block holds the serial queue, work scheduled on it cannot start.
    queue.sync {
      DispatchTimeScheduler().schedule(after: .zero, on: queue) {
        dispatchPrecondition(condition: .onQueue(queue))
        ran.withValue { $0 = true }
        resolver.fulfill()
      }
      #expect(!ran.value)
    }
    try await done.value
    #expect(ran.value)
  }

  @Test("a negative delay is treated as zero and still runs asynchronously")
  func negativeDelayRuns() async throws {
    let (ran, resolver) = Promise<Int>.pending()
    DispatchTimeScheduler().schedule(after: .seconds(-5), on: .global()) { resolver.fulfill(1) }
    #expect(try await ran.value == 1)
  }

  @Test("cancelling a timer drops its work and releases the closure")
  func cancellingReleasesWork() async throws {
    let ran = Kit.Locked(false)
    var canary: Kit.Canary? = Kit.Canary()
    let weak = Kit.Weak(canary)
    let work = DispatchTimeScheduler().schedule(after: .seconds(3600), on: .global()) {
      [canary] in
      _ = canary
      ran.withValue { $0 = true }
    }
    canary = nil
    #expect(!weak.isReleased)
    work.cancel()
    work.cancel()
    #expect(await Kit.eventually { weak.isReleased })
    #expect(!ran.value)
  }

  @Test("a timer that fired releases its closure")
  func firedTimerReleasesWork() async throws {
    var canary: Kit.Canary? = Kit.Canary()
    let weak = Kit.Weak(canary)
    let (ran, resolver) = Promise<Void>.pending()
    let work = DispatchTimeScheduler().schedule(after: .milliseconds(1), on: .global()) {
      [canary] in
      _ = canary
      resolver.fulfill()
    }
    canary = nil
    try await ran.value
    #expect(await Kit.eventually { weak.isReleased })
    work.cancel()  // after firing: a no-op
  }

  @Test("the default scheduler is real time, and combinators read it when called")
  func defaultSchedulerIsReplaceable() async throws {
    #expect(PromiseSchedulers.default is DispatchTimeScheduler)
    // A recording wrapper around real time: other tests running meanwhile are unaffected.
    let recording = Kit.RecordingScheduler()
    let previous = PromiseSchedulers.default
    PromiseSchedulers.default = recording
    let queue = DispatchQueue(label: "scheduler.default")
    let waited = Promise.after(.zero, on: queue)
    PromiseSchedulers.default = previous
    try await waited.value
    #expect(recording.requestedQueues.contains { $0 === queue })
    #expect(PromiseSchedulers.default is DispatchTimeScheduler)
  }
}
