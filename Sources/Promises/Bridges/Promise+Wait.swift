import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Signals a semaphore when the promise it is registered on settles.
final class SignalNode: _PromiseNode, @unchecked Sendable {
  // Safety: `semaphore` is immutable and thread-safe.
  let semaphore = DispatchSemaphore(value: 0)

  init() { super.init(queue: nil) }

  // A waiter that gives up removes its node from the promise (`Promise.unregister`), so a
  // node in a list is always a live observer (the default).

  override var downstream: Downstream { .none }

  override func fire() {
    semaphore.signal()
  }
}

/// Returns whether the calling thread is running `queue` (or a queue that targets it), as far
/// as `wait` needs to know.
///
/// Known for the queue a promise drain runs, for the main queue on the main thread, and for
/// queues told apart by their marks (`QueueMark`). Dispatch's global concurrent queues are
/// never reported: waiting on one of their threads blocks one worker, not the queue.
private func waitingThreadRuns(_ queue: DispatchQueue) -> Bool {
  if Drain.isDraining(queue) { return true }
  // Not `===`: on Linux each `DispatchQueue.main` read may return a new wrapper object. The
  // main thread runs the main queue; other threads may too (an async `main`), which the
  // queue mark detects.
  if queue.label == mainQueueLabel && Thread.isMainThread { return true }
  if queue.label.hasPrefix("com.apple.root.") { return false }
  return QueueMark.isCurrent(queue)
}

/// The main queue's label, read once.
private let mainQueueLabel = DispatchQueue.main.label

extension Promise {
  /// Blocks the calling thread until the promise settles, for at most `timeout` seconds.
  ///
  /// Meant for command-line tools, scripts and tests; in an app or on a server, chain with
  /// `then` or use `try await promise.value`, which block nothing. Never call it on the main
  /// thread of an app. A wait polls for up to 50 µs before it blocks, yielding the processor
  /// between polls: a promise settled meanwhile on another core is collected without a sleep
  /// and a wake-up, and work that needs this core to settle it gets to run.
  ///
  /// - Parameter timeout: The longest time to wait, in seconds.
  /// - Returns: The value, if the promise is fulfilled in time.
  /// - Throws: The rejection error; `PromiseError.timedOut` when time is up first (the
  ///   promise itself is left pending); `PromiseError.waitWouldDeadlock` when called on a
  ///   queue that the promise still needs to settle (a callback queue of the pending chain),
  ///   where blocking would deadlock (checked once the promise has stayed pending for 10
  ///   milliseconds, or when the timeout expires if that is sooner, so waits that end
  ///   sooner do not pay for walking the chain).
  public func wait(timeout: Double) throws -> Value {
    // NaN and negative waits are treated as zero; infinite or huge ones as no limit.
    try wait(timeout: Duration.clampedSeconds(timeout))
  }

  /// Blocks the calling thread until the promise settles, for at most `timeout`.
  ///
  /// See `wait(timeout:)` taking seconds.
  public func wait(timeout: Duration) throws -> Value {
    if settledFlag.load(ordering: .acquiring) || settlesWhileSpinning(within: timeout) {
      return try settledResultAfterWait()
    }
    let node = SignalNode()
    register(node)
    let deadline = timeout.dispatchDeadline
    // Most waits end quickly. The deadlock check walks every pending link of the chain, so it
    // runs only once the promise has stayed pending for a moment: a wait that would deadlock
    // is still reported, after blocking its queue for at most `deadlockCheckDelay`.
    let firstDeadline = min(deadline, .now() + Self.deadlockCheckDelay)
    if node.semaphore.wait(timeout: firstDeadline) == .timedOut {
      do {
        try checkWaitWouldNotDeadlock()
      } catch {
        unregister(node)
        throw error
      }
      if deadline > firstDeadline, node.semaphore.wait(timeout: deadline) == .success {
        return try settledResultAfterWait()
      }
      // A waiter that gives up takes its node back: polling `wait` on a promise that stays
      // pending must not pile up nodes in it. If the promise settled meanwhile, the node is
      // (being) fired instead, and the outcome is read below.
      if unregister(node) {
        throw PromiseError.timedOut(after: timeout, createdAt: creationSite)
      }
    }
    return try settledResultAfterWait()
  }

  /// How long `wait` blocks before it looks for a deadlock.
  ///
  /// Not shorter: the first block is a semaphore wait with this timeout, and on the 2-vCPU
  /// virtual machine of Docs/Performance.md ("The waiting thread's wake-up") a wait woken
  /// before a 1-ms timeout came back about 5 µs later than one with a 10-ms, 100-ms or 30-s
  /// timeout (why was not isolated): a fifth of a 1,000-link chain's end wake-up.
  private static var deadlockCheckDelay: DispatchTimeInterval { .milliseconds(10) }

  /// How long `wait` polls before it blocks, in nanoseconds.
  private static var spinNanoseconds: UInt64 { 50_000 }

  /// Polls the settled flag for a few microseconds (at most `timeout`).
  ///
  /// A promise settling on another core meanwhile is collected without putting this thread
  /// to sleep and waking it again, which costs more than the poll. Each poll yields the
  /// processor (`sched_yield`): when the work that settles the promise waits for this very
  /// core (a loaded machine, or a process held to one CPU), a busy loop would only delay it.
  private func settlesWhileSpinning(within timeout: Duration) -> Bool {
    guard timeout > .zero else { return false }
    let (seconds, attoseconds) = timeout.components
    let limit =
      seconds > 0 ? Self.spinNanoseconds : min(Self.spinNanoseconds, UInt64(attoseconds / 1_000_000_000))
    let start = DispatchTime.now().uptimeNanoseconds
    var polls = 0
    while !settledFlag.load(ordering: .acquiring) {
      polls &+= 1
      if polls & 3 == 0, DispatchTime.now().uptimeNanoseconds &- start >= limit { return false }
      sched_yield()
    }
    return true
  }

  /// The outcome once settled: the value, or the rejection thrown (which counts as handled).
  private func settledResultAfterWait() throws -> Value {
    lock.lock()
    flags.insert(.observed)
    lock.unlock()
    // Settled: the phase, value and error no longer change (see `Promise`'s safety note).
    switch state.phase {
    case .fulfilled: return loadValue()
    case .rejected: throw state.error.unsafelyUnwrapped
    case .pending: preconditionFailure("Promises: wait woke up before the promise settled")
    }
  }

  /// Throws if the calling thread is running a queue that a pending link of this chain needs.
  ///
  /// Walks what the promise waits on, through sources, adopted promises and aggregates'
  /// inputs, up to 10,000 pending nodes (a best effort: beyond that it does not look).
  private func checkWaitWouldNotDeadlock() throws {
    var checked: DispatchQueue?
    var blocked: DispatchQueue?
    _ = _PromiseNode.walkUpstream(from: self, limit: 10_000) { _, queue in
      // A chain usually runs on one queue: check each run of the same queue once.
      guard let queue, queue !== checked else { return false }
      checked = queue
      if waitingThreadRuns(queue) {
        blocked = queue
        return true
      }
      return false
    }
    if let blocked {
      throw PromiseError.waitWouldDeadlock(queue: blocked.label, createdAt: creationSite)
    }
  }
}
