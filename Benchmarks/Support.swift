import Dispatch
import Foundation
import Synchronization

/// How long any single wait in a benchmark may block before the case fails (instead of hanging).
let waitLimitSeconds: Double = 60

/// The serial queue our promise callbacks run on (`then(on: callbackQueue)`).
let callbackQueue = DispatchQueue(label: "benchmarks.promise-callbacks")

/// The serial queue the hand-written Dispatch baselines hop on.
let baselineQueue = DispatchQueue(label: "benchmarks.dispatch-baseline")

/// Waits for a semaphore, failing the case after `waitLimitSeconds`.
func waitOrFail(_ semaphore: DispatchSemaphore, _ what: String) throws {
  if semaphore.wait(timeout: .now() + waitLimitSeconds) == .timedOut {
    throw BenchmarkFailure("timed out after \(Int(waitLimitSeconds)) s waiting for \(what)")
  }
}

/// Counts callbacks down to zero and sums what they report; `wait()` returns the sum once all ran.
/// The same helper is used by the promise cases and the baselines, so its cost (two uncontended
/// atomic read-modify-writes per callback) is the same on both sides of a ratio.
final class Countdown: Sendable {
  private let remaining: Atomic<Int>
  private let total = Atomic<Int>(0)
  private let done = DispatchSemaphore(value: 0)

  init(_ count: Int) {
    remaining = Atomic(count)
    if count == 0 { done.signal() }
  }

  func arrive(adding value: Int) {
    total.wrappingAdd(value, ordering: .relaxed)
    if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
  }

  func wait() throws -> Int {
    try waitOrFail(done, "all callbacks")
    return total.load(ordering: .acquiring)
  }
}

/// A value delivered once from another thread: `complete` stores it and signals, `wait()` returns it.
final class Completion: Sendable {
  private let value = Atomic<Int>(0)
  private let done = DispatchSemaphore(value: 0)

  func complete(_ newValue: Int) {
    value.store(newValue, ordering: .releasing)
    done.signal()
  }

  func wait() throws -> Int {
    try waitOrFail(done, "the completion")
    return value.load(ordering: .acquiring)
  }
}

/// A hand-written one-shot completion for one thread: a single callback, run inline by `fulfill`
/// (or inline by `whenDone` if already fulfilled). No lock, no queue: the cost floor.
final class InlineFuture {
  private var value: Int?
  private var callback: ((Int) -> Void)?

  func whenDone(_ body: @escaping (Int) -> Void) {
    if let value { body(value) } else { callback = body }
  }

  func fulfill(_ newValue: Int) {
    value = newValue
    if let body = callback {
      callback = nil
      body(newValue)
    }
  }
}

/// A hand-written lock-protected hand-off between a thread that supplies a value and a thread that
/// supplies a callback: whoever comes second takes the other's part and runs the callback, through
/// `deliver` (a `queue.async` for the Dispatch baseline, a direct call for the inline one).
final class HandoffSlot: Sendable {
  private enum State {
    case empty
    case value(Int)
    case callback(@Sendable (Int) -> Void)
    case done
  }

  private let state = Mutex(State.empty)

  func fulfill(_ value: Int, deliver: (Int, @escaping @Sendable (Int) -> Void) -> Void) {
    let callback: (@Sendable (Int) -> Void)? = state.withLock { state in
      switch state {
      case .empty:
        state = .value(value)
        return nil
      case .callback(let callback):
        state = .done
        return callback
      case .value, .done:
        return nil
      }
    }
    if let callback { deliver(value, callback) }
  }

  func whenDone(
    _ callback: @escaping @Sendable (Int) -> Void, deliver: (Int, @escaping @Sendable (Int) -> Void) -> Void
  ) {
    let value: Int? = state.withLock { state in
      switch state {
      case .empty:
        state = .callback(callback)
        return nil
      case .value(let value):
        state = .done
        return value
      case .callback, .done:
        return nil
      }
    }
    if let value { deliver(value, callback) }
  }
}

/// Runs `body` in one new `Task` and blocks the calling thread until it returns. The bridge costs
/// one task creation and one semaphore hand-off per timed run, amortised over all its units.
func blockingAwait(_ body: @escaping @Sendable () async throws -> Int) throws -> Int {
  let result = Mutex<Result<Int, any Error>?>(nil)
  let done = DispatchSemaphore(value: 0)
  Task {
    let outcome: Result<Int, any Error>
    do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
    result.withLock { $0 = outcome }
    done.signal()
  }
  try waitOrFail(done, "the async task")
  return try result.withLock { $0 }!.get()
}

/// Starts a thread that waits at a start line, runs `body` and signals when finished; the caller
/// releases it with `go()` right before doing its own half of the work, so both halves overlap.
final class RacingThread: Sendable {
  private let ready = Atomic(false)
  private let started = Atomic(false)
  private let finished = DispatchSemaphore(value: 0)

  init(_ body: @escaping @Sendable () -> Void) {
    let thread = Thread { [self] in
      ready.store(true, ordering: .releasing)
      while !started.load(ordering: .acquiring) {}
      body()
      finished.signal()
    }
    thread.start()
  }

  /// Spins until the thread is at the start line, then releases it.
  func go() {
    while !ready.load(ordering: .acquiring) {}
    started.store(true, ordering: .releasing)
  }

  func join() throws { try waitOrFail(finished, "the racing thread") }
}
