import Dispatch
import Foundation

extension VirtualTimeScheduler {
  /// Moves the clock forward, one deadline at a time, until `promise` settles; returns its value.
  ///
  /// Use it instead of a hand-written sequence of `advance` and `waitForPendingWork()` calls:
  /// a step that sequence misses no longer hangs the test until the runner's limit. Each step
  /// first lets in-flight work finish — it waits until `DispatchQueue.promises`, the queues in
  /// `queues`, and the queues of the pending timers have run what was submitted to them —
  /// then returns if `promise` has settled, else runs the earliest pending work (and anything
  /// else due at that instant). When nothing is pending, it waits up to `idleTimeout` of real
  /// time for work that is still running to schedule a timer or settle the promise.
  ///
  /// - Parameters:
  ///   - promise: The promise to wait for.
  ///   - queues: Other queues your callbacks run on, to let finish between steps.
  ///   - maximumSteps: The most deadlines to advance to; 1,000 by default.
  ///   - idleTimeout: How long, in real time, to wait when no timer is pending; 10 s by default.
  /// - Returns: The promise's value.
  /// - Throws: The promise's error if it is rejected; `PromiseError.virtualTimeStalled`, naming
  ///   the timers still pending, if it has not settled after `maximumSteps` steps or when
  ///   nothing is pending and nothing arrives within `idleTimeout`.
  public func advance<Value: Sendable>(
    until promise: Promise<Value>, letting queues: [DispatchQueue] = [], maximumSteps: Int = 1_000,
    idleTimeout: Duration = .seconds(10)
  ) async throws -> Value {
    var steps = 0
    while true {
      await letInFlightWorkFinish(on: [.promises] + queues + pendingWorkQueues)
      if let result = promise.result { return try result.get() }
      if let deadline = nextDeadline {
        guard steps < maximumSteps else {
          throw stalled(promise, reason: "\(steps) steps taken, the most allowed")
        }
        advance(to: max(deadline, now))
        steps += 1
        continue
      }
      guard await waitForWorkOrSettlement(of: promise, timeout: idleTimeout) else {
        throw stalled(
          promise, reason: "after \(steps) steps nothing was scheduled within \(idleTimeout) of real time")
      }
    }
  }

  private func stalled<Value>(_ promise: Promise<Value>, reason: String) -> PromiseError {
    .virtualTimeStalled(
      reason: "\(reason), at virtual time \(now)", pendingTimers: pendingWorkDescriptions,
      createdAt: promise.creationSite)
  }

  /// Waits until each of `queues` has run the blocks submitted to it so far, twice over (so a
  /// block that hands work to another of them is covered too).
  private func letInFlightWorkFinish(on queues: [DispatchQueue]) async {
    for _ in 0..<2 {
      for queue in queues {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
          queue.async(flags: .barrier) { continuation.resume() }
        }
      }
    }
  }

  /// Waits until work is scheduled or `promise` settles; `false` if neither happens in time.
  private func waitForWorkOrSettlement<Value: Sendable>(
    of promise: Promise<Value>, timeout: Duration
  ) async -> Bool {
    let first = FirstOutcome()
    // A node of its own rather than `value` on a link: this wait ends without cancelling
    // anything, and counts as an observer of `promise` while it lasts.
    let node = ForwardingNode<Value> { _ in first.resume(true) }
    let deadline = timeout.dispatchDeadline
    // Neither event needs the cooperative pool: the scheduler wakes the waiter on the thread
    // that schedules the work, and the timer runs on a Dispatch queue. (A task waiting in
    // `waitForPendingWork` could start only after the pool had a free thread — more than 10 s
    // in a sanitizer run whose pool threads were all blocked — and the wait timed out while
    // a timer was pending.)
    let waiter = whenPendingWork(count: 1) { first.resume(true) }
    let progressed = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      first.set(continuation)
      promise.register(node)
      DispatchQueue.global().asyncAfter(deadline: deadline) { first.resume(false) }
    }
    if let waiter { removeWaiter(waiter) }
    node.retire()
    promise.unregister(node)
    // Whatever woke it, the state decides: work that arrived as the timer fired still counts.
    return progressed || nextDeadline != nil || !promise.isPending
  }
}

/// A continuation resumed by the first of several events, with that event's value.
private final class FirstOutcome: Sendable {
  /// The continuation is resumed after unlocking.
  private let state = LockedBox(State())

  private struct State: Sendable {
    var continuation: CheckedContinuation<Bool, Never>?
    var outcome: Bool?
  }

  /// Hands over the continuation; resumes it at once if an event came first.
  func set(_ continuation: CheckedContinuation<Bool, Never>) {
    let outcome: Bool? = state.withLock { state in
      if state.outcome == nil { state.continuation = continuation }
      return state.outcome
    }
    if let outcome { continuation.resume(returning: outcome) }
  }

  /// Records an event: the first one resumes the continuation, later ones are ignored.
  func resume(_ value: Bool) {
    let continuation: CheckedContinuation<Bool, Never>? = state.withLock { state in
      guard state.outcome == nil else { return nil }
      state.outcome = value
      defer { state.continuation = nil }
      return state.continuation
    }
    continuation?.resume(returning: value)
  }
}
