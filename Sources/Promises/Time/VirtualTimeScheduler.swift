import Dispatch
import Foundation

/// Runs timers on a clock that moves only when you advance it: instant, exact timers for tests.
///
/// Pass it as `scheduler:` to `delay`, `timeout`, `retry` and `Promise.after`, then move time
/// with `advance(by:)`, `advance(to:)` or `runUntilIdle()`. Nothing runs by itself: work
/// scheduled for virtual time `t` runs only once a call advances the clock to `t` or later.
///
/// How due work runs: one item at a time, in deadline order (items due at the same instant in
/// the order they were scheduled), each **on its own queue, synchronously** (`queue.sync`,
/// or inline when the advancing thread is already running that queue). So when `advance`
/// returns, every item that was due has run — a timeout has rejected its promise, a delay has
/// settled its promise — and work that those items scheduled for a time up to the target has
/// run too. What happens *after* that on other queues (callbacks chained with `then`, the
/// next attempt of a `retry`) is still asynchronous: `await` the promise, or call
/// `waitForPendingWork(count:)` before advancing again.
///
/// Releasing the scheduler drops its pending work: a promise that only that work could settle
/// (`Promise.after`, `delay`) is then rejected with `PromiseError.brokenPromise`.
///
/// While an item runs, `now` is its deadline. Advance from one thread at a time, and not from a
/// queue that due work is waiting to run on in another thread's `advance`; a queue that never
/// runs (the main queue of a Linux program that does not call `dispatchMain()`) blocks it.
///
/// ```
/// let clock = VirtualTimeScheduler()
/// let result = slowOperation().timeout(.seconds(5), scheduler: clock)
/// clock.advance(by: .seconds(5))   // the timeout fires: `result` is rejected with .timedOut
/// ```
public final class VirtualTimeScheduler: PromiseScheduler, Sendable {
  /// The clock, the pending work and the waiters, in one box: due work is taken out under the
  /// lock and runs after unlocking.
  ///
  /// Releasing the scheduler releases the box and, with it, the work that will never run and
  /// what that work captured: a promise waiting only on it (`Promise.after`, `delay`) is then
  /// rejected with `brokenPromise`.
  private let state = LockedBox(State())

  /// Creates a scheduler whose clock reads zero.
  public init() {}

  /// Returns the virtual time elapsed since this scheduler was created (zero at first).
  public var now: Duration {
    state.withLock { $0.currentTime }
  }

  /// Counts the scheduled work items that have neither run nor been cancelled.
  public var pendingCount: Int {
    state.withLock { $0.items.count }
  }

  /// Returns the virtual time at which the earliest pending work is due; `nil` if none is pending.
  public var nextDeadline: Duration? {
    state.withLock { $0.items.first?.deadline }
  }

  /// Schedules `work` on `queue` at virtual time `now + delay`; it runs when the clock gets there.
  ///
  /// Unlike a real scheduler, this never runs anything by itself: the work waits for a call to
  /// `advance(by:)`, `advance(to:)` or `runUntilIdle()`. A negative `delay` counts as zero.
  ///
  /// - Parameters:
  ///   - delay: How much virtual time to wait.
  ///   - queue: Where `work` runs when it is due.
  ///   - work: The work; released after it has run or when it is cancelled.
  /// - Returns: A handle whose `cancel()` removes the work (it no longer counts in `pendingCount`).
  @discardableResult
  public func schedule(
    after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void
  ) -> any ScheduledWork {
    let (sequence, ready) = state.withLock { state in
      let sequence = state.insert(after: delay, on: queue, work)
      return (sequence, state.takeSatisfiedWaiters())
    }
    for waiter in ready { waiter.wake(true) }
    return VirtualTimeHandle(scheduler: self, sequence: sequence)
  }

  /// Moves the clock forward by `duration`, running the work that becomes due, in order.
  ///
  /// Returns once every due item has run on its queue (see the type's documentation), including
  /// items scheduled by those items for a time up to the new `now`.
  ///
  /// - Parameter duration: How far to move the clock; must not be negative.
  /// - Returns: The number of work items that ran.
  @discardableResult
  public func advance(by duration: Duration) -> Int {
    precondition(duration >= .zero, "VirtualTimeScheduler.advance(by:): negative duration \(duration)")
    return advance(to: now.saturatingAdding(duration))
  }

  /// Moves the clock to `time`, running the work due until then, in order.
  ///
  /// Returns once every due item has run on its queue (see the type's documentation). `time`
  /// earlier than `now` is a programming error.
  ///
  /// - Parameter time: The virtual time to move to, measured from the scheduler's creation.
  /// - Returns: The number of work items that ran.
  @discardableResult
  public func advance(to time: Duration) -> Int {
    let start = now
    precondition(time >= start, "VirtualTimeScheduler.advance(to:): \(time) is before now (\(start))")
    var count = 0
    while let item = state.withLock({ $0.takeNext(dueBy: time) }) {
      item.run()
      count += 1
    }
    state.withLock { $0.currentTime = max($0.currentTime, time) }
    return count
  }

  /// Runs all pending work, moving the clock to each item's deadline, until none is left.
  ///
  /// Includes work scheduled by the work it runs, so it does not return while something keeps
  /// rescheduling itself (a `retry` stops after its last attempt, so it always ends).
  ///
  /// - Returns: The number of work items that ran.
  @discardableResult
  public func runUntilIdle() -> Int {
    var count = 0
    while let item = state.withLock({ $0.takeNext(dueBy: nil) }) {
      item.run()
      count += 1
    }
    return count
  }

  /// Suspends until at least `count` work items are pending.
  ///
  /// Use it before advancing when the work is scheduled asynchronously — for example a `retry`
  /// schedules its wait only after an attempt has failed on its queue. Returns at once if
  /// enough work is pending already.
  ///
  /// - Parameter count: The number of pending items to wait for.
  /// - Throws: `CancellationError` if the waiting task is cancelled first.
  public func waitForPendingWork(count: Int = 1) async throws {
    let id: UInt64 = state.withLock { state in
      defer { state.nextWaiterID += 1 }
      return state.nextWaiterID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        enum Outcome { case ready, cancelled, waiting }
        let outcome: Outcome = state.withLock { state in
          if state.items.count >= count { return .ready }
          if Task.isCancelled { return .cancelled }
          state.waiters.append(
            PendingWaiter(id: id, count: count) { ready in
              if ready {
                continuation.resume()
              } else {
                continuation.resume(throwing: CancellationError())
              }
            })
          return .waiting
        }
        switch outcome {
        case .ready: continuation.resume()
        case .cancelled: continuation.resume(throwing: CancellationError())
        case .waiting: break
        }
      }
    } onCancel: {
      removeWaiter(id)?.wake(false)
    }
  }

  /// Calls `wake` once at least `count` work items are pending — at once, on this thread, if
  /// they already are; otherwise on the thread that schedules the item that makes the count.
  ///
  /// Unlike `waitForPendingWork(count:)` this needs no task to run, so a busy cooperative pool
  /// cannot delay it. Returns an identifier for `removeWaiter(_:)`, or `nil` if `wake` ran.
  func whenPendingWork(count: Int, _ wake: @escaping @Sendable () -> Void) -> UInt64? {
    let id: UInt64? = state.withLock { state in
      guard state.items.count < count else { return nil }
      defer { state.nextWaiterID += 1 }
      state.waiters.append(PendingWaiter(id: state.nextWaiterID, count: count) { _ in wake() })
      return state.nextWaiterID
    }
    if id == nil { wake() }
    return id
  }

  /// Removes the waiter `id` if it has not been woken; returns it.
  @discardableResult
  func removeWaiter(_ id: UInt64) -> PendingWaiter? {
    state.withLock { state in
      guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
      return state.waiters.remove(at: index)
    }
  }

  /// The pending work, earliest first, each as "at DEADLINE on 'QUEUE LABEL'".
  ///
  /// Built after unlocking, from the deadlines and queues read under the lock (not a copy of
  /// the items, which would keep their work alive past a `cancel()`).
  var pendingWorkDescriptions: [String] {
    state.withLock { $0.items.map { ($0.deadline, $0.queue) } }
      .map { deadline, queue in "at \(deadline) on '\(queue.label)'" }
  }

  /// The queues that pending work will run on, each once.
  var pendingWorkQueues: [DispatchQueue] {
    var queues: [DispatchQueue] = []
    for queue in state.withLock({ $0.items.map(\.queue) }) where !queues.contains(where: { $0 === queue }) {
      queues.append(queue)
    }
    return queues
  }

  /// Removes the work of `sequence` if it is still pending.
  fileprivate func cancel(_ sequence: UInt64) {
    // The removed item is released after unlocking: what its work captures may run user code
    // in its deinit.
    _ = state.withLock { $0.remove(sequence) }
  }

  /// The clock, the pending work and the waiters.
  private struct State: Sendable {
    var currentTime: Duration = .zero
    /// Pending items, sorted by (deadline, sequence).
    var items: [VirtualTimeItem] = []
    var nextSequence: UInt64 = 0
    var waiters: [PendingWaiter] = []
    var nextWaiterID: UInt64 = 0

    /// Adds `work` to run on `queue` at `currentTime + delay`, after every item due before it
    /// or with it; returns its sequence number.
    mutating func insert(
      after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void
    ) -> UInt64 {
      let item = VirtualTimeItem(
        deadline: currentTime.saturatingAdding(max(delay, .zero)), sequence: nextSequence,
        queue: queue, work: work)
      nextSequence += 1
      // A binary search for the first item due after `item`.
      var low = 0
      var high = items.count
      while low < high {
        let middle = (low + high) / 2
        if items[middle].isAfter(item) {
          high = middle
        } else {
          low = middle + 1
        }
      }
      items.insert(item, at: low)
      return item.sequence
    }

    /// Removes and returns the earliest item due by `time` (any item when `nil`), setting
    /// `currentTime` to its deadline.
    mutating func takeNext(dueBy time: Duration?) -> VirtualTimeItem? {
      guard let first = items.first else { return nil }
      if let time, first.deadline > time { return nil }
      items.removeFirst()
      currentTime = max(currentTime, first.deadline)
      return first
    }

    /// Removes and returns the item of `sequence`, or `nil` if it has run or been removed.
    mutating func remove(_ sequence: UInt64) -> VirtualTimeItem? {
      guard let index = items.firstIndex(where: { $0.sequence == sequence }) else { return nil }
      return items.remove(at: index)
    }

    /// Removes and returns the waiters whose count is reached.
    mutating func takeSatisfiedWaiters() -> [PendingWaiter] {
      guard !waiters.isEmpty else { return [] }
      let pending = items.count
      let ready = waiters.filter { $0.count <= pending }
      waiters.removeAll { $0.count <= pending }
      return ready
    }
  }
}

/// A waiter for pending work, woken once, after unlocking.
///
/// A task suspended in `waitForPendingWork(count:)`, or a callback of
/// `whenPendingWork(count:_:)`: `wake(true)` when the count is reached, `wake(false)` when the
/// waiting task is cancelled.
struct PendingWaiter: Sendable {
  let id: UInt64
  let count: Int
  let wake: @Sendable (Bool) -> Void
}

/// One pending work item of a `VirtualTimeScheduler`, kept in its list until it runs or is
/// cancelled.
private struct VirtualTimeItem {
  let deadline: Duration
  /// The order of scheduling, which breaks ties between equal deadlines; unique per scheduler.
  let sequence: UInt64
  let queue: DispatchQueue
  let work: @Sendable () -> Void

  func isAfter(_ other: VirtualTimeItem) -> Bool {
    (deadline, sequence) > (other.deadline, other.sequence)
  }

  /// Runs the work on its queue and returns when it has run.
  func run() {
    if QueueMark.isCurrent(queue) {
      work()
    } else {
      queue.sync(execute: work)
    }
  }
}

/// The handle of a `VirtualTimeScheduler`'s work item: cancelling it removes the item from the
/// scheduler's list, if it is still there.
private struct VirtualTimeHandle: ScheduledWork {
  weak var scheduler: VirtualTimeScheduler?
  let sequence: UInt64

  func cancel() {
    scheduler?.cancel(sequence)
  }
}
