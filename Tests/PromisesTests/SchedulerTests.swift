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
    within limit: Duration = .seconds(30), _ condition: @Sendable () -> Bool
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

/// Durations longer than the monotonic clock can count to from now (`Int64.max` seconds, or
/// half of it: libdispatch reads the top two bits of a deadline as its clock) mean "never".
@Suite("Durations too long for the clock", .timeLimit(.minutes(1)))
struct HugeDurationTests {
  /// Far-future durations: past `Int64.max` ns (clamped to it: past 2^63 ns from now), just
  /// past 2^62 ns from now (about 146 years), and 100 years, which fits.
  static let hugeDurations: [Duration] = [
    .seconds(Int64.max), .seconds(Int64.max / 2), .seconds(1 << 40), .nanoseconds(Int64.max / 2),
    .seconds(100 * 365 * 86_400),
  ]

  /// How long the tests check that a far-future timer has not fired (a real-time bound).
  static let check = Duration.milliseconds(100)

  @Test("a huge duration is a deadline in the distant future", arguments: hugeDurations)
  func dispatchDeadlineIsDistantFuture(duration: Duration) {
    let deadline = duration.dispatchDeadline
    // Never a deadline libdispatch reads as a wall-clock or another clock's time.
    #expect(deadline == .distantFuture || deadline.uptimeNanoseconds < 1 << 62)
    #expect(deadline > .now() + .seconds(3600))
  }

  @Test("an ordinary duration is that far from now")
  func ordinaryDeadline() {
    let before = DispatchTime.now()
    let deadline = Duration.seconds(10).dispatchDeadline
    #expect(deadline >= before + .seconds(10))
    #expect(deadline < .now() + .seconds(11))
    #expect(Duration.seconds(-1).dispatchDeadline <= .now())
  }

  @Test("a huge timer of the real-time scheduler does not fire at once", arguments: hugeDurations)
  func schedulerTimerWaits(duration: Duration) async throws {
    let fired = Kit.Locked(false)
    let work = DispatchTimeScheduler().schedule(after: duration, on: .global()) {
      fired.withValue { $0 = true }
    }
    try await Promise.after(Self.check).value
    #expect(!fired.value)
    work.cancel()
  }

  @Test("Promise.after a huge duration stays pending", arguments: hugeDurations)
  func afterStaysPending(duration: Duration) async throws {
    let waited = Promise.after(duration)
    try await Promise.after(Self.check).value
    #expect(waited.isPending)
    waited.cancel()
  }

  @Test("delay by a huge duration stays pending", arguments: hugeDurations)
  func delayStaysPending(duration: Duration) async throws {
    let delayed = Promise(1).delay(duration)
    try await Promise.after(Self.check).value
    #expect(delayed.isPending)
    delayed.cancel()
  }

  @Test("a huge timeout does not fire: the source settles later and wins", arguments: hugeDurations)
  func timeoutLetsTheSourceWin(duration: Duration) async throws {
    let (source, resolver) = Promise<Int>.pending()
    let limited = source.timeout(duration)
    try await Promise.after(Self.check).value
    #expect(limited.isPending)
    resolver.fulfill(7)
    #expect(try await limited.value == 7)
  }

  @Test("a retry with a huge delay waits before its next attempt", arguments: hugeDurations)
  func retryWaits(duration: Duration) async throws {
    let attempts = Kit.Locked(0)
    let retried = Promise<Int>.retry(attempts: 2, delay: .constant(duration)) {
      attempts.withValue { $0 += 1 }
      return Promise(error: Kit.Failure(1))
    }
    try await Promise.after(Self.check).value
    #expect(attempts.value == 1)
    #expect(retried.isPending)
    retried.cancel()
  }

  @Test("wait with a huge timeout waits for the promise", arguments: hugeDurations)
  func waitWaits(duration: Duration) throws {
    let (promise, resolver) = Promise<Int>.pending()
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { resolver.fulfill(3) }
    #expect(try promise.wait(timeout: duration) == 3)
  }

  @Test("the virtual-time scheduler adds huge durations without overflowing")
  func virtualTimeSaturates() {
    let clock = VirtualTimeScheduler()
    let ran = Kit.Locked(0)
    clock.schedule(after: .seconds(Int64.max), on: .global()) { ran.withValue { $0 += 1 } }
    clock.advance(by: .seconds(Int64.max / 2))
    #expect(ran.value == 0)
    // Far past anything the clock can add up to: still no overflow, and the work is due.
    for _ in 0..<20 { clock.advance(by: .seconds(Int64.max)) }
    #expect(ran.value == 1)
    clock.schedule(after: .seconds(Int64.max), on: .global()) { ran.withValue { $0 += 1 } }
    #expect(clock.pendingCount == 1)
    #expect(clock.nextDeadline.map { $0 >= clock.now } == true)
  }
}
