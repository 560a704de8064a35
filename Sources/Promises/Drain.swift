import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Runs nodes whose source settled: on their queue, batching same-queue work in one block.
///
/// Each thread has one `Drain`, with two run lists; each queue has one `Outbox`.
///
/// - Queue nodes (user callbacks). A node that becomes ready for queue `Q` — registered on a
///   settled promise, or its promise settled — goes to `Q`'s outbox, a FIFO list; only when
///   the outbox was idle is one block dispatched to `Q`, and that block runs what the outbox
///   holds, then what arrived meanwhile, until it is empty. While such a block runs, the drain
///   is "active on Q": nodes that become ready for `Q` because a promise settled in this block
///   (a chain of `then(on: Q)` links) join its queue list and run next, ahead of the outbox.
/// - Internal nodes (`queue == nil`: adoption, aggregates, waiters, awaiters) run at once,
///   inside the settle that made them ready, so a waiter wakes while the callback that
///   fulfilled its promise is still running. A settle made by an internal node only appends
///   to the internal list, which the outermost settle on this thread empties in a loop: any
///   chain of adoptions settles on a flat stack.
///
/// Order. Callbacks are never synchronous from the registering call's point of view: a node
/// joins a run list only when its source settles, and a node registered on a promise that has
/// already settled always goes to the outbox, never to a running drain's list (it could
/// overtake earlier callbacks of the same promise still waiting in the outbox). A settling
/// promise places its callbacks (into outboxes and the drain's lists) before it releases its
/// lock, so a callback registered concurrently on the just-settled promise, which places
/// itself under that lock too, queues behind them. A block runs at most `batchLimit` nodes;
/// what is left goes back to the FRONT of the outbox, ahead of what arrived meanwhile, and one
/// new block is dispatched to `Q`, behind the blocks that other code enqueued on `Q` while
/// this one ran: they wait for at most one batch.
///
/// Dispatch's global concurrent queues (`DispatchQueue.global()`) have no outbox: their nodes
/// are dispatched as before, one block per queue per settlement, so independent callbacks on
/// them still run in parallel.
@usableFromInline
final class Drain {
  /// A node in a run list, which owns one reference to it.
  @usableFromInline typealias Node = Unmanaged<_PromiseNode>

  /// The most nodes one dispatched block runs before it hands the rest to a new block.
  static let batchLimit = 64

  /// Nodes linked through `link`, first to last, each owned (+1) by the list.
  struct RunList {
    var head: Node?
    var tail: Node?

    var isEmpty: Bool { head == nil }

    @inline(__always)
    mutating func append(_ node: Node) {
      if let tail {
        tail._withUnsafeGuaranteedRef { $0.link = node }
      } else {
        head = node
      }
      tail = node
    }

    /// Removes the first node; the list's reference to it goes to the caller.
    @inline(__always)
    mutating func popFirst() -> _PromiseNode? {
      guard let first = head else { return nil }
      let node = first.takeRetainedValue()
      head = node.link
      if head == nil { tail = nil }
      node.link = nil
      return node
    }
  }

  // Only its own thread touches a drain: exclusivity is trivially kept.
  /// The identity of the queue whose block this thread runs; meaningful only while
  /// `isActive`.
  ///
  /// Only compared, never used to reach the queue: an identity rather than a reference, so
  /// a chain link does not retain and release the queue object. The block keeps the queue
  /// object alive while it runs, so the identity cannot be reused meanwhile.
  @exclusivity(unchecked) var queue: ObjectIdentifier?
  /// The outbox whose block this thread runs (`nil` in a block of a global queue); kept
  /// alive by the block.
  @exclusivity(unchecked) var outbox: Unmanaged<Outbox>?
  @exclusivity(unchecked) var isActive = false
  /// Nodes for `queue`, run in this block.
  @exclusivity(unchecked) var queued = RunList()
  /// Internal nodes (`queue == nil`), run at once.
  @exclusivity(unchecked) var internalNodes = RunList()
  /// The internal list is being emptied further up this thread's stack.
  @exclusivity(unchecked) var isForwarding = false
  /// The last queue whose outbox this thread looked up, and that outbox (see `outbox(of:)`).
  @exclusivity(unchecked) var cachedQueue: DispatchQueue?
  @exclusivity(unchecked) var cachedOutbox: Outbox?

  static let key: pthread_key_t = {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { pointer in
      #if canImport(Darwin)
        Unmanaged<Drain>.fromOpaque(pointer).release()
      #else
        if let pointer { Unmanaged<Drain>.fromOpaque(pointer).release() }
      #endif
    }
    precondition(status == 0, "pthread_key_create failed: \(status)")
    return key
  }()

  deinit {
    // Runs in a thread-specific-data destructor as the thread exits, after Dispatch has
    // cleaned up its own per-thread caches: releasing a queue there (maybe its last
    // reference) would run Dispatch code that refills them (AddressSanitizer caught a double
    // free). Another thread releases it later.
    if let cachedQueue { QueueGraveyard.bury(cachedQueue) }
  }

  /// The calling thread's drain, created on first use.
  static var current: Unmanaged<Drain> {
    if let pointer = pthread_getspecific(key) {
      return Unmanaged<Drain>.fromOpaque(pointer)
    }
    let drain = Unmanaged.passRetained(Drain())
    pthread_setspecific(key, drain.toOpaque())
    return drain
  }

  /// Places the nodes of a promise that has just settled, under that promise's lock.
  ///
  /// `first` is linked in registration order, each node owned by the list. Placing them under
  /// the lock makes a callback registered right after the settlement queue behind them.
  /// Internal nodes only join the internal list: the caller runs them with
  /// `forwardIfNeeded()` after unlocking.
  @usableFromInline
  static func place(_ first: Node) {
    Drain.current._withUnsafeGuaranteedRef { $0.place(first) }
  }

  /// Runs the internal nodes that `place` collected on this thread, unless a caller further
  /// up the stack already does.
  @usableFromInline
  static func forwardIfNeeded() {
    guard let pointer = pthread_getspecific(key) else { return }
    Unmanaged<Drain>.fromOpaque(pointer)._withUnsafeGuaranteedRef { drain in
      if !drain.isForwarding, !drain.internalNodes.isEmpty { drain.forward() }
    }
  }

  /// Runs the internal nodes `place` collected, unless a caller further up the stack does.
  @usableFromInline @inline(__always)
  func forwardIfNeeded() {
    if !isForwarding, !internalNodes.isEmpty { forward() }
  }

  /// Schedules nodes outside any promise's lock: internal nodes run now (what `place` and
  /// `forwardIfNeeded` do together).
  @usableFromInline
  static func schedule(_ first: Node) {
    Drain.current._withUnsafeGuaranteedRef { drain in
      drain.place(first)
      if !drain.isForwarding, !drain.internalNodes.isEmpty { drain.forward() }
    }
  }

  /// Sends one callback registered on an already settled promise to its queue's outbox.
  ///
  /// Called under that promise's lock (see `place`). Never joins a running drain's list.
  @usableFromInline
  static func post(_ node: Node, on queue: DispatchQueue) {
    let outbox = Drain.current._withUnsafeGuaranteedRef { $0.outbox(of: queue) }
    if outbox.isGlobal {
      dispatch(node, on: queue)
    } else if outbox.append(node) {
      dispatch(outbox, on: queue)
    }
  }

  /// Sorts the nodes: internal ones to run now, those made ready for this block's queue to
  /// this block, the others to their queue's outbox (or, for a global queue, dispatched,
  /// grouped per queue).
  @usableFromInline
  func place(_ first: Node) {
    var batchQueue: DispatchQueue?
    var batch = RunList()
    var node: Node? = first
    while let current = node {
      let target = current._withUnsafeGuaranteedRef { current in
        node = current.link
        current.link = nil
        return current.queue
      }
      guard let target else {
        internalNodes.append(current)
        continue
      }
      if isActive && ObjectIdentifier(target) == queue {
        queued.append(current)
        continue
      }
      let targetOutbox = outbox(of: target)
      if isActive, let outbox, outbox.toOpaque() == Unmanaged.passUnretained(targetOutbox).toOpaque() {
        // The same queue through another `DispatchQueue` object (`DispatchQueue.main` is a new
        // one at each read on Linux).
        queued.append(current)
      } else if targetOutbox.isGlobal {
        if target === batchQueue {
          batch.append(current)
        } else {
          if let head = batch.head, let batchQueue { Drain.dispatch(head, on: batchQueue) }
          batchQueue = target
          batch = RunList()
          batch.append(current)
        }
      } else if targetOutbox.append(current) {
        Drain.dispatch(targetOutbox, on: target)
      }
    }
    if let head = batch.head, let batchQueue { Drain.dispatch(head, on: batchQueue) }
  }

  /// Fires internal nodes until the internal list is empty.
  private func forward() {
    isForwarding = true
    while let node = internalNodes.popFirst() {
      if let callbacks = node.fire() { place(callbacks) }
    }
    isForwarding = false
  }

  /// Fires one node of this block's queue and what it made ready to run at once.
  @inline(__always)
  private func fire(_ node: _PromiseNode) {
    if let callbacks = node.fire() { place(callbacks) }
    if !isForwarding, !internalNodes.isEmpty { forward() }
  }

  /// Dispatches one block to `queue` that runs what `outbox` holds.
  static func dispatch(_ outbox: Outbox, on queue: DispatchQueue) {
    queue.async {
      Drain.current._withUnsafeGuaranteedRef { $0.runOutbox(outbox) }
    }
  }

  /// Runs `first` (and the nodes linked after it, each owned by the list) in one block on
  /// `queue`: for global queues, which have no outbox.
  static func dispatch(_ first: Node, on queue: DispatchQueue) {
    // The block captures only the node pointer (its queue is `first.queue`): a small context.
    queue.async {
      Drain.current._withUnsafeGuaranteedRef { $0.runList(first) }
    }
  }

  /// The body of an outbox's block: runs at most `batchLimit` nodes, the queue list (made
  /// ready in this block) before the outbox's next nodes.
  private func runOutbox(_ outbox: Outbox) {
    // A block can start on a thread whose drain is busy only through nested execution
    // (for instance a callback that runs a queue's work synchronously); keep that drain's
    // list aside and restore it afterwards so neither list is reordered.
    let saved = (isActive, self.queue, self.outbox, queued)
    isActive = true
    self.outbox = Unmanaged.passUnretained(outbox)
    queued = RunList()
    // Keeps the queue object of the block alive while `queue` holds its identity.
    var blockQueue: DispatchQueue?
    var budget = Drain.batchLimit
    while true {
      if queued.isEmpty {
        guard let taken = outbox.takeAll() else { break }
        queued = taken
        if blockQueue == nil {
          blockQueue = taken.head.unsafelyUnwrapped._withUnsafeGuaranteedRef { $0.queue }
          self.queue = Drain.identity(blockQueue)
        }
      }
      if budget == 0 {
        // What is left goes back ahead of what arrived meanwhile; a new block takes it,
        // behind the work enqueued on the queue while this one ran.
        outbox.putBack(queued)
        queued = RunList()
        Drain.dispatch(outbox, on: blockQueue.unsafelyUnwrapped)
        break
      }
      budget -= 1
      // The node's reference moves from the list to `node` and is dropped after it fired.
      fire(queued.popFirst().unsafelyUnwrapped)
    }
    (isActive, self.queue, self.outbox, queued) = saved
    withExtendedLifetime(blockQueue) {}
  }

  /// The body of a global queue's block: runs the list and the nodes it makes ready.
  private func runList(_ first: Node) {
    let saved = (isActive, self.queue, self.outbox, queued)
    isActive = true
    self.outbox = nil
    var last = first
    let blockQueue = first._withUnsafeGuaranteedRef { node in
      while let next = last._withUnsafeGuaranteedRef({ $0.link }) { last = next }
      return node.queue
    }
    self.queue = Drain.identity(blockQueue)
    queued = RunList(head: first, tail: last)
    while let node = queued.popFirst() { fire(node) }
    (isActive, self.queue, self.outbox, queued) = saved
    withExtendedLifetime(blockQueue) {}
  }

  /// The outbox of `queue`, through a one-entry cache of the last queue this thread looked up.
  ///
  /// A queue-specific look-up costs about 150 instructions (measured with callgrind); the
  /// cache, a pointer comparison. It holds the queue object strongly, so its address cannot be
  /// reused by another queue while cached; the price is that the last queue a thread sent
  /// callbacks to lives until the thread sends callbacks to another queue or exits.
  @inline(__always)
  func outbox(of queue: DispatchQueue) -> Outbox {
    if let cachedQueue, cachedQueue === queue, let cachedOutbox { return cachedOutbox }
    return cacheOutbox(of: queue)
  }

  @inline(never)
  private func cacheOutbox(of queue: DispatchQueue) -> Outbox {
    QueueGraveyard.empty()
    let outbox = Outbox.of(queue)
    cachedQueue = queue
    cachedOutbox = outbox
    return outbox
  }

  /// The identity `queue` is compared by.
  @inline(__always)
  static func identity(_ queue: DispatchQueue?) -> ObjectIdentifier? {
    queue.map(ObjectIdentifier.init)
  }

  /// Whether the calling thread is currently running callbacks for `queue`.
  static func isDraining(_ queue: DispatchQueue) -> Bool {
    guard let pointer = pthread_getspecific(key) else { return false }
    return Unmanaged<Drain>.fromOpaque(pointer)._withUnsafeGuaranteedRef { drain in
      drain.isActive && drain.queue == ObjectIdentifier(queue)
    }
  }
}

/// Queues cached by threads that have exited, released by the next thread that looks up an
/// outbox outside its cache (see `Drain.deinit`): at most one per exited thread waits here.
enum QueueGraveyard {
  /// Guards `queues`.
  final class Storage: @unchecked Sendable {
    // Safety of `@unchecked Sendable`: `queues` is read and written only under `lock`.
    let lock = SpinLock()
    var queues: [DispatchQueue] = []
  }

  static let storage = Storage()
  /// Whether `queues` may be non-empty; lets `empty()` skip the lock.
  static let isOccupied = Atomic<Bool>(false)

  static func bury(_ queue: DispatchQueue) {
    storage.lock.lock()
    storage.queues.append(queue)
    isOccupied.store(true, ordering: .releasing)
    storage.lock.unlock()
  }

  /// Releases the buried queues.
  @inline(__always)
  static func empty() {
    guard isOccupied.load(ordering: .relaxed) else { return }
    storage.lock.lock()
    let queues = storage.queues
    storage.queues = []
    isOccupied.store(false, ordering: .relaxed)
    storage.lock.unlock()
    _ = queues
  }
}
