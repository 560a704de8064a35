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
public final class VirtualTimeScheduler: PromiseScheduler, @unchecked Sendable {
  // Safety: every `var` below is only accessed while `lock` is held. Work runs after unlocking.
  private let lock = NSLock()
  private var currentTime: Duration = .zero
  /// Pending items, sorted by (deadline, sequence).
  private var items: [VirtualTimeItem] = []
  private var nextSequence: UInt64 = 0
  private var waiters: [PendingWaiter] = []
  private var nextWaiterID: UInt64 = 0

  /// Creates a scheduler whose clock reads zero.
  public init() {}

  deinit {
    // Work that will never run is released, and with it what it captured: a promise waiting
    // only on it (`Promise.after`, `delay`) is then rejected with `brokenPromise`.
    for item in items { item.cancel() }
  }

  /// Returns the virtual time elapsed since this scheduler was created (zero at first).
  public var now: Duration {
    lock.withLock { currentTime }
  }

  /// Counts the scheduled work items that have neither run nor been cancelled.
  public var pendingCount: Int {
    lock.withLock { items.count }
  }

  /// Returns the virtual time at which the earliest pending work is due; `nil` if none is pending.
  public var nextDeadline: Duration? {
    lock.withLock { items.first?.deadline }
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
    let item = VirtualTimeItem(scheduler: self, queue: queue, work: work)
    let ready: [PendingWaiter] = lock.withLock {
      item.deadline = currentTime.saturatingAdding(max(delay, .zero))
      item.sequence = nextSequence
      nextSequence += 1
      items.insert(item, at: insertionIndex(for: item))
      return takeSatisfiedWaiters()
    }
    for waiter in ready { waiter.continuation.resume() }
    return item
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
    while let item = takeNext(dueBy: time) {
      item.run()
      count += 1
    }
    lock.withLock { currentTime = max(currentTime, time) }
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
    while let item = takeNext(dueBy: nil) {
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
    let id: UInt64 = lock.withLock {
      defer { nextWaiterID += 1 }
      return nextWaiterID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        enum Outcome { case ready, cancelled, waiting }
        let outcome: Outcome = lock.withLock {
          if items.count >= count { return .ready }
          if Task.isCancelled { return .cancelled }
          waiters.append(PendingWaiter(id: id, count: count, continuation: continuation))
          return .waiting
        }
        switch outcome {
        case .ready: continuation.resume()
        case .cancelled: continuation.resume(throwing: CancellationError())
        case .waiting: break
        }
      }
    } onCancel: {
      let waiter: PendingWaiter? = lock.withLock {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return nil }
        return waiters.remove(at: index)
      }
      waiter?.continuation.resume(throwing: CancellationError())
    }
  }

  /// The pending work, earliest first, each as "at DEADLINE on 'QUEUE LABEL'".
  ///
  /// Built after unlocking from a copy of the list (copying an array allocates nothing).
  /// `deadline` is only written before an item is published, so reading it here is safe.
  var pendingWorkDescriptions: [String] {
    lock.withLock { items }.map { "at \($0.deadline) on '\($0.queue.label)'" }
  }

  /// The queues that pending work will run on, each once.
  var pendingWorkQueues: [DispatchQueue] {
    var queues: [DispatchQueue] = []
    for item in lock.withLock({ items }) where !queues.contains(where: { $0 === item.queue }) {
      queues.append(item.queue)
    }
    return queues
  }

  // MARK: Internals

  /// Removes and returns the earliest item due by `time` (any item when `nil`), setting `now`
  /// to its deadline.
  private func takeNext(dueBy time: Duration?) -> VirtualTimeItem? {
    lock.withLock {
      guard let first = items.first else { return nil }
      if let time, first.deadline > time { return nil }
      items.removeFirst()
      currentTime = max(currentTime, first.deadline)
      return first
    }
  }

  /// Removes `item` if it is still pending.
  fileprivate func remove(_ item: VirtualTimeItem) {
    lock.withLock {
      if let index = items.firstIndex(where: { $0 === item }) {
        items.remove(at: index)
      }
    }
  }

  /// Returns where `item` goes in `items`: after every item due before it or with it.
  ///
  /// A binary search; called with `lock` held.
  private func insertionIndex(for item: VirtualTimeItem) -> Int {
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
    return low
  }

  /// Waiters whose count is reached; called with `lock` held.
  private func takeSatisfiedWaiters() -> [PendingWaiter] {
    guard !waiters.isEmpty else { return [] }
    let pending = items.count
    let ready = waiters.filter { $0.count <= pending }
    waiters.removeAll { $0.count <= pending }
    return ready
  }
}

/// A task suspended in `waitForPendingWork(count:)`.
private struct PendingWaiter {
  let id: UInt64
  let count: Int
  let continuation: CheckedContinuation<Void, any Error>
}

/// One work item of a `VirtualTimeScheduler`.
private final class VirtualTimeItem: ScheduledWork, @unchecked Sendable {
  // Safety: `deadline` and `sequence` are written once, under the scheduler's lock, before the
  // item is published in its list, and never written again: readers find the item through the
  // list, under that lock or in a copy taken under it, so the write happened before. `work` is only
  // accessed while `lock` is held. `queue` is a constant, `scheduler` is a weak reference.
  private let lock = NSLock()
  private weak var scheduler: VirtualTimeScheduler?
  let queue: DispatchQueue
  private var work: (@Sendable () -> Void)?
  var deadline: Duration = .zero
  var sequence: UInt64 = 0

  init(scheduler: VirtualTimeScheduler, queue: DispatchQueue, work: @escaping @Sendable () -> Void) {
    self.scheduler = scheduler
    self.queue = queue
    self.work = work
  }

  func isAfter(_ other: VirtualTimeItem) -> Bool {
    (deadline, sequence) > (other.deadline, other.sequence)
  }

  private func take() -> (@Sendable () -> Void)? {
    lock.withLock {
      defer { work = nil }
      return work
    }
  }

  /// Runs the work on its queue and returns when it has run.
  func run() {
    guard let work = take() else { return }
    if QueueMark.isCurrent(queue) {
      work()
    } else {
      queue.sync(execute: work)
    }
  }

  func cancel() {
    guard take() != nil else { return }
    scheduler?.remove(self)
  }
}
