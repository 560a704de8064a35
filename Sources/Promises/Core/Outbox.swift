import Dispatch
import Synchronization

/// The callbacks ready to run on one queue, in the order they became ready, and whether a
/// block to run them is on its way.
///
/// Stored on the queue itself, as a queue-specific value: found from any `DispatchQueue`
/// object for the queue (`DispatchQueue.main` returns a new one at each read on Linux), and
/// released with the queue — no table to grow or to clean. A queue cannot go while its outbox
/// holds nodes: each node holds its queue.
@usableFromInline
final class Outbox: @unchecked Sendable {
  // Safety of `@unchecked Sendable`: `waiting` and `isScheduled` are read and written
  // only under `lock`; `isGlobal` is a constant. The outbox reaches other threads through
  // the queue-specific value, which `of` pairs with an acquiring load (see `published`).
  let lock = SpinLock()
  /// The nodes waiting, oldest first, each owned by the list.
  @exclusivity(unchecked) private var waiting = NodeList()
  /// A block that empties the outbox is dispatched or running; set while nodes wait.
  @exclusivity(unchecked) private var isScheduled = false
  /// A global concurrent queue: nodes bypass the outbox (see `Drain`).
  let isGlobal: Bool

  init(isGlobal: Bool) {
    self.isGlobal = isGlobal
  }

  static let key = DispatchSpecificKey<Outbox>()
  /// A counter that shows ThreadSanitizer how outboxes are published.
  ///
  /// Incremented (releasing) before each new outbox is stored on its queue; loaded
  /// (acquiring) after each look-up. ThreadSanitizer does not see a queue-specific value as
  /// a hand-off between threads; this pair shows it that the outbox was initialized first.
  static let published = Atomic<UInt>(0)
  /// Serializes creation, so that two threads never store two outboxes on one queue.
  static let creation = SpinLock()

  /// The outbox of `queue`, created on first use.
  @inline(__always)
  static func of(_ queue: DispatchQueue) -> Outbox {
    if let outbox = queue.getSpecific(key: key) {
      _ = published.load(ordering: .acquiring)
      return outbox
    }
    return create(for: queue)
  }

  @inline(never)
  private static func create(for queue: DispatchQueue) -> Outbox {
    creation.lock()
    defer { creation.unlock() }
    if let outbox = queue.getSpecific(key: key) { return outbox }
    let outbox = Outbox(isGlobal: queue.label.hasPrefix("com.apple.root."))
    published.add(1, ordering: .releasing)
    queue.setSpecific(key: key, value: outbox)
    return outbox
  }

  /// Appends `node` (owned by the caller, not linked); returns whether the caller must
  /// dispatch the block that empties the outbox (it was idle).
  @inline(__always)
  func append(_ node: NodeList.Node) -> Bool {
    lock.lock()
    waiting.append(node)
    let wasIdle = !isScheduled
    isScheduled = true
    lock.unlock()
    return wasIdle
  }

  /// Takes every waiting node, in order; when there are none, marks the outbox idle (the
  /// calling block is about to end) and returns an empty list.
  func takeAll() -> NodeList {
    lock.lock()
    defer { lock.unlock() }
    if waiting.isEmpty { isScheduled = false }
    return waiting.takeAll()
  }

  /// Whether no block is scheduled to deliver this outbox's nodes: none wait in it.
  ///
  /// For tests that wait until a queue has delivered everything: a block that stops after its
  /// batch puts the rest back and sends them in a new block, behind the work enqueued meanwhile.
  var isIdle: Bool {
    lock.lock()
    defer { lock.unlock() }
    return !isScheduled
  }

  /// Puts nodes taken by a block that stopped early back at the front, ahead of the nodes
  /// that arrived meanwhile; the outbox stays scheduled (the caller dispatches the next block).
  func putBack(_ list: NodeList) {
    guard !list.isEmpty else { return }
    lock.lock()
    waiting.prepend(list)
    lock.unlock()
  }
}
