import Dispatch
import Synchronization

/// The least a batched hand-off of callbacks to a serial queue can cost: what a `then` on a
/// settled promise does, minus everything that makes it a promise.
///
/// Per callback: one object the size of a `then` link, holding the closure, appended to a list
/// under a lock; one block is dispatched only when the list was idle, and it runs everything the
/// list holds. No promise state, no cancellation check, no batch bound (the library's blocks
/// stop after 64 callbacks and re-dispatch), so it is cheaper than any promise can be. Its ratio
/// to `dispatch` is the bound on what batching alone can win on this machine.
final class FloorOutbox: Sendable {
  private struct Waiting {
    var head: Unmanaged<FloorNode>?
    var tail: Unmanaged<FloorNode>?
    var isScheduled = false
  }

  private let waiting = Mutex(Waiting())
  private let queue: DispatchQueue

  init(queue: DispatchQueue) {
    self.queue = queue
  }

  /// Appends `body`; dispatches the draining block when the list was idle.
  func post(_ body: @escaping @Sendable () -> Void) {
    let node = Unmanaged.passRetained(FloorNode(body))
    let wasIdle = waiting.withLock { waiting in
      if let tail = waiting.tail {
        tail._withUnsafeGuaranteedRef { $0.next = node }
      } else {
        waiting.head = node
      }
      waiting.tail = node
      defer { waiting.isScheduled = true }
      return !waiting.isScheduled
    }
    if wasIdle { queue.async { self.drain() } }
  }

  /// Runs and frees what the list holds until it finds the list empty (then marks it idle).
  private func drain() {
    while true {
      let taken: Unmanaged<FloorNode>? = waiting.withLock { waiting in
        let head = waiting.head
        waiting.head = nil
        waiting.tail = nil
        if head == nil { waiting.isScheduled = false }
        return head
      }
      guard var current = taken else { return }
      while true {
        let next = current._withUnsafeGuaranteedRef { node in
          node.body()
          return node.next
        }
        current.release()
        guard let next else { break }
        current = next
      }
    }
  }
}

/// One waiting callback: 88 bytes with the object header, the size of a `then` link, so that
/// the allocator does the same work for it.
private final class FloorNode: @unchecked Sendable {
  // Safety: written by the posting thread before the node is published under the outbox's
  // mutex, read by the block that took it from the list under that mutex; never shared after.
  let body: @Sendable () -> Void
  var next: Unmanaged<FloorNode>?
  private let padding: (Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0)

  init(_ body: @escaping @Sendable () -> Void) {
    self.body = body
  }
}
