import Dispatch
import Synchronization

/// Marks dispatch queues with unique numbers, to tell whether the calling thread runs a queue.
///
/// A mark is a queue-specific value set on first use. Marks come from a counter and are never
/// reused, unlike object addresses: on Linux `DispatchQueue.main` and `DispatchQueue.global()`
/// return a new wrapper object at each read, whose address a later queue may get, while a mark
/// set through any wrapper stays on the underlying queue.
///
/// `DispatchQueue.getSpecific` looks through the queue the thread runs and then its targets,
/// so a block on a queue that targets a marked queue counts as running the target — unless the
/// targeting queue has a mark of its own, which hides the target's. Global concurrent queues
/// count as running on every thread of their pool; callers that must not treat them so (see
/// `wait`) check for them first.
enum QueueMark {
  /// The one key every mark is stored under.
  static let key = DispatchSpecificKey<UInt64>()
  /// The last mark handed out; marks start at 1.
  private static let counter = Atomic<UInt64>(0)

  /// Returns the mark of `queue`, marking it first if it has none.
  static func mark(of queue: DispatchQueue) -> UInt64 {
    if let existing = queue.getSpecific(key: key) { return existing }
    let fresh = counter.wrappingAdd(1, ordering: .relaxed).newValue
    queue.setSpecific(key: key, value: fresh)
    // Re-read: of two threads marking at once, the last write wins for both.
    return queue.getSpecific(key: key) ?? fresh
  }

  /// Returns whether the calling thread is running `queue` (or a queue that targets it and
  /// has no mark of its own).
  static func isCurrent(_ queue: DispatchQueue) -> Bool {
    // Mark first, then read: read first, a block on a queue not marked yet would see the mark
    // of the queue it targets (a global queue, say) instead of its own.
    let mark = mark(of: queue)
    return DispatchQueue.getSpecific(key: key) == mark
  }
}
