import Dispatch
import Foundation
import Testing

@testable import Promises

// Shared helpers for the core tests. Nothing here sleeps: every wait is either an `await` on a
// promise (bounded by the suite's `.timeLimit`) or a semaphore/group wait with a timeout.

/// Whether ThreadSanitizer instruments this process (`swift test --sanitize=thread`).
///
/// TSan makes every memory access many times slower; the deep-chain and stress tests shrink
/// their sizes under it (a tenth) so that they stay within their time limits, while keeping
/// the same shapes.
let isThreadSanitizerActive: Bool = dlsym(nil, "__tsan_init") != nil

/// An error whose cases carry a number, for checking which error reached a callback.
enum CoreTestError: Error, Equatable, Sendable {
  case first
  case second
  case numbered(Int)
}

/// An error compared by identity: proves that the very same error instance was passed on.
final class IdentifiedError: Error, Sendable, CustomStringConvertible {
  let name: String
  init(_ name: String = "identified") { self.name = name }
  var description: String { "IdentifiedError(\(name))" }
}

/// Whether `error` is the very instance `expected`.
func isSame(_ error: (any Error)?, as expected: IdentifiedError) -> Bool {
  guard let error = error as? IdentifiedError else { return false }
  return error === expected
}

/// A value guarded by an `NSLock` (ThreadSanitizer understands it, and reports false races on a contended `Mutex`: see SpinLock.swift).
final class Guarded<Value>: @unchecked Sendable {
  // Safety: `storage` is only touched while `lock` is held.
  private let lock = NSLock()
  private var storage: Value

  init(_ value: Value) {
    storage = value
  }

  var value: Value {
    get { lock.withLock { storage } }
    set { lock.withLock { storage = newValue } }
  }

  @discardableResult
  func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body(&storage)
  }
}

extension Guarded where Value == [Int] {
  func append(_ element: Int) {
    withLock { $0.append(element) }
  }
}

extension Guarded where Value == Int {
  func increment() {
    withLock { $0 += 1 }
  }
}

/// An object whose lifetime tests observe through a weak reference.
final class LifetimeToken: Sendable {
  let name: String
  init(_ name: String = "tracked") { self.name = name }
}

/// A `map` link on `source` whose closure counts its runs in `runs` and captures a token; the
/// weak reference to the token tells whether the link still holds its closure.
@inline(never)
func countingLink(
  on source: Promise<Int>, queue: DispatchQueue, runs: Guarded<Int>
) -> (link: Promise<Int>, capture: WeakObserver<LifetimeToken>) {
  let token = LifetimeToken()
  let link = source.map(on: queue) { value -> Int in
    runs.increment()
    _ = token
    return value
  }
  return (link, WeakObserver(token))
}

/// A weak reference that can be read from any thread.
final class WeakObserver<Object: AnyObject>: @unchecked Sendable {
  // Safety: written once in `init`; weak loads are atomic in the Swift runtime.
  weak var object: Object?
  init(_ object: Object?) { self.object = object }
  var isNil: Bool { object == nil }
}

/// Detects a callback that runs before the call that registered it has returned (rule 2).
///
/// `register` holds a recursive lock while it makes the call and marks it as returned. A
/// callback that runs synchronously inside the call re-enters the lock on the same thread and
/// sees "not returned"; a callback on another thread waits for the mark, so it cannot observe a
/// half-finished registration either. Either way `ranBeforeReturn` tells the truth.
final class ReturnProbe: @unchecked Sendable {
  // Safety: `returned` and `observations` are only touched while `lock` is held.
  private let lock = NSRecursiveLock()
  private var returned = false
  private var observations: [Bool] = []

  func register<R>(_ call: () -> R) -> R {
    lock.lock()
    defer { lock.unlock() }
    let result = call()
    returned = true
    return result
  }

  /// Called from the callback.
  func callbackRan() {
    lock.lock()
    observations.append(returned)
    lock.unlock()
  }

  /// `true` when every callback observed the registering call as finished.
  var everyCallbackRanAfterReturn: Bool {
    lock.lock()
    defer { lock.unlock() }
    return !observations.isEmpty && observations.allSatisfy { $0 }
  }

  var callbackCount: Int {
    lock.lock()
    defer { lock.unlock() }
    return observations.count
  }
}

/// The kinds of queue that ordering tests run on.
///
/// - `serial`: callbacks of one promise *run* in registration order.
/// - `concurrent`: callbacks are *submitted* in registration order, but a concurrent queue may
///   run two submitted blocks at once, so only "each runs exactly once" can be checked.
/// - `concurrentTargetingSerial`: a concurrent queue whose target is a serial queue; it runs
///   blocks one at a time in submission order, which makes the submission order of callbacks
///   given a concurrent queue observable.
enum CallbackQueueKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case serial
  case concurrent
  case concurrentTargetingSerial

  var testDescription: String { rawValue }

  func makeQueue(_ label: String = #function) -> DispatchQueue {
    switch self {
    case .serial:
      return DispatchQueue(label: "tests.serial.\(label)")
    case .concurrent:
      return DispatchQueue(label: "tests.concurrent.\(label)", attributes: .concurrent)
    case .concurrentTargetingSerial:
      let target = DispatchQueue(label: "tests.target.\(label)")
      return DispatchQueue(
        label: "tests.concurrent-on-serial.\(label)", attributes: .concurrent, target: target)
    }
  }

  /// Whether blocks submitted to the queue run one at a time, in submission order.
  var runsInSubmissionOrder: Bool { self != .concurrent }
}

/// Waits until every block submitted to `queue` before this call has finished and the
/// callbacks waiting in the queue's outbox have been delivered.
///
/// Uses a barrier block, so it also works on concurrent queues. A block that ran callbacks
/// keeps its captures until it returns; this is the point after which it has. An outbox's
/// block runs at most `Drain.batchLimit` callbacks and sends the rest in a new block behind
/// the work enqueued meanwhile, which can be this barrier: on a queue other tests share
/// (`.promises`) a callback placed before the call could still be waiting after one barrier
/// (seen once under ThreadSanitizer: `aCancelledChainIsNotReported`). So the barrier is repeated
/// until a barrier finds the outbox idle, a bounded number of times, since other tests may keep
/// it busy. A test of this helper passes `onceEnqueued` (run after the first barrier is
/// enqueued) and `inBarrier` (run inside each barrier block).
func drainQueue(
  _ queue: DispatchQueue, onceEnqueued: @Sendable () -> Void = {},
  inBarrier: @escaping @Sendable () -> Void = {}
) async {
  for round in 0..<10_000 {
    let idle = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      queue.async(flags: .barrier) {
        inBarrier()
        // Read inside the barrier: nothing of the queue runs meanwhile.
        continuation.resume(returning: queue.getSpecific(key: Outbox.key)?.isIdle ?? true)
      }
      if round == 0 { onceEnqueued() }
    }
    if idle { return }
  }
}

/// The outcome of `promise`, awaited without throwing.
func settledOutcome<Value>(of promise: Promise<Value>) async -> Result<Value, any Error> {
  do {
    return .success(try await promise.value)
  } catch {
    return .failure(error)
  }
}

/// The error `promise` is rejected with, or `nil` if it is fulfilled.
func rejectionError<Value>(of promise: Promise<Value>) async -> (any Error)? {
  if case .failure(let error) = await settledOutcome(of: promise) { return error }
  return nil
}

/// Suspends until the current task is cancelled (at once if it already is).
func suspendUntilCancelled() async {
  let state = Guarded<(cancelled: Bool, continuation: CheckedContinuation<Void, Never>?)>((false, nil))
  await withTaskCancellationHandler {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let resumeNow = state.withLock { state -> Bool in
        if state.cancelled { return true }
        state.continuation = continuation
        return false
      }
      if resumeNow { continuation.resume() }
    }
  } onCancel: {
    let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
      state.cancelled = true
      defer { state.continuation = nil }
      return state.continuation
    }
    continuation?.resume()
  }
}

/// Runs `body(index)` on `count` threads that start together (a barrier), and waits for all.
///
/// Real threads, not tasks: they overlap even when the cooperative pool is busy. The waiting is
/// done by a thread of its own, so the calling task holds no pool thread meanwhile (200 rounds
/// of this under ThreadSanitizer blocked both pool threads of a 2-core machine for 18 s, and
/// every other test waited). Returns `false` if they did not all finish within `timeout` seconds.
func runOnThreads(
  _ count: Int, timeout: Double = 30, _ body: @escaping @Sendable (Int) -> Void
) async -> Bool {
  await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
    Thread { continuation.resume(returning: runOnThreadsBlocking(count, timeout: timeout, body)) }.start()
  }
}

/// `runOnThreads`, waiting on the calling thread.
private func runOnThreadsBlocking(
  _ count: Int, timeout: Double, _ body: @escaping @Sendable (Int) -> Void
) -> Bool {
  let start = DispatchSemaphore(value: 0)
  let ready = DispatchGroup()
  let done = DispatchGroup()
  for index in 0..<count {
    ready.enter()
    done.enter()
    let thread = Thread {
      ready.leave()
      start.wait()
      body(index)
      done.leave()
    }
    thread.start()
  }
  _ = ready.wait(timeout: .now() + timeout)
  for _ in 0..<count { start.signal() }
  return done.wait(timeout: .now() + timeout) == .success
}

/// Waits, without blocking a thread, until `group` is empty.
func awaitGroup(_ group: DispatchGroup) async {
  await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
    group.notify(queue: .global()) { continuation.resume() }
  }
}

/// The number of callbacks waiting on `promise` (an internal of the state machine).
func callbacksWaiting<Value>(on promise: Promise<Value>) -> Int {
  promise.lock.lock()
  defer { promise.lock.unlock() }
  return promise.state.waitingCount
}

/// Suspends (yielding, never sleeping) until `condition` holds, for at most `limit`.
///
/// Past the limit, or when the test's task is cancelled (its time limit), it records an issue
/// and returns: a condition that can no longer become true (a waiter that timed out and
/// unregistered before it was seen) fails the test instead of spinning forever, which a time
/// limit cannot stop.
func yieldUntil(
  within limit: Duration = .seconds(40), sourceLocation: SourceLocation = #_sourceLocation,
  _ condition: () -> Bool
) async {
  let clock = ContinuousClock()
  let deadline = clock.now + limit
  while !condition() {
    if Task.isCancelled || clock.now > deadline {
      Issue.record("the condition did not hold within \(limit)", sourceLocation: sourceLocation)
      return
    }
    await Task.yield()
  }
}

/// Whether the calling code runs on `queue` (or on a queue that targets it).
///
/// The non-crashing twin of `dispatchPrecondition(condition: .onQueue(queue))`: a wrong queue
/// becomes a test failure instead of killing the test process. Marks `queue` with a specific.
func isOnQueue(_ queue: DispatchQueue) -> Bool {
  let mark = UInt(bitPattern: ObjectIdentifier(queue).hashValue)
  if queue.getSpecific(key: queueMarkKey) != mark {
    queue.setSpecific(key: queueMarkKey, value: mark)
  }
  return DispatchQueue.getSpecific(key: queueMarkKey) == mark
}

private let queueMarkKey = DispatchSpecificKey<UInt>()

/// Collects queue checks made inside callbacks, for the test body to assert on afterwards.
///
/// `#expect` inside a callback would run on a Dispatch thread, outside the test's task, where
/// Swift Testing cannot attribute the issue to the test; so callbacks only record.
final class QueueChecker: Sendable {
  private let misses = Guarded<[String]>([])
  private let checks = Guarded(0)

  /// Records a miss unless the calling code runs on `queue`.
  func verify(_ queue: DispatchQueue, line: Int = #line) {
    checks.increment()
    if !isOnQueue(queue) { misses.withLock { $0.append("line \(line): not on \(queue.label)") } }
  }

  /// Asserts that `count` checks ran and none missed.
  func expectAllOnQueue(count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(checks.value == count, sourceLocation: sourceLocation)
    #expect(misses.value.isEmpty, "\(misses.value)", sourceLocation: sourceLocation)
  }
}
