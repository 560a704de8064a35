internal import CPromisesSupport
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
  @usableFromInline typealias Node = NodeList.Node

  /// The most nodes one dispatched block runs before it hands the rest to a new block.
  static let batchLimit = 64

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
  @exclusivity(unchecked) var queued = NodeList()
  /// Internal nodes (`queue == nil`), run at once.
  @exclusivity(unchecked) var internalNodes = NodeList()
  /// The internal list is being emptied further up this thread's stack.
  @exclusivity(unchecked) var isForwarding = false
  /// Blocks that `place` and `post` decided to dispatch under a promise's lock.
  ///
  /// `flush()` dispatches them after unlocking: `queue.async` allocates and runs Dispatch's
  /// code, which belong outside a lock. The outbox is already marked scheduled, so nothing can overtake
  /// the nodes it holds meanwhile (Docs/Design.md, "Invariants", I4). The first is kept
  /// inline; more (several queues in one settlement) go to `moreDispatches`.
  @exclusivity(unchecked) var firstDispatch: PendingDispatch?
  @exclusivity(unchecked) var moreDispatches: [PendingDispatch] = []
  /// The last queue whose outbox this thread looked up, and that outbox (see `outbox(of:)`).
  @exclusivity(unchecked) var cachedQueue: DispatchQueue?
  @exclusivity(unchecked) var cachedOutbox: Outbox?
  /// Queues let go of under a promise's lock — the cached queue a look-up replaced, the
  /// queues `QueueGraveyard` held — released by `finishPlacing()` after unlocking.
  ///
  /// Either may be the last reference, and releasing a queue runs Dispatch's code (and may
  /// free it), which belongs outside a lock (Docs/Design.md, I6). Its capacity is reserved
  /// at creation, so keeping a queue here allocates only past `displacedCapacity` queues in one
  /// settlement.
  @exclusivity(unchecked) var displaced: ContiguousArray<DispatchQueue>
  /// Whether `displaced` holds queues: the one flag `finishPlacing()` reads for it.
  @exclusivity(unchecked) var hasDisplaced = false
  static let displacedCapacity = 8

  init() {
    displaced = []
    displaced.reserveCapacity(Self.displacedCapacity)
  }

  /// One block to dispatch: an outbox's, or a global queue's batch.
  struct PendingDispatch {
    let queue: DispatchQueue
    let outbox: Outbox?
    let nodes: NodeList
  }

  static let key: pthread_key_t = {
    var key = pthread_key_t()
    // The key is only for its destructor: the drain is found through the thread-local word.
    let status = pthread_key_create(&key) { pointer in
      // A destructor of another key that runs after this one and settles a promise makes a
      // new drain, as the first use on any thread does.
      promises_set_current_drain(nil)
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
    for queue in displaced { QueueGraveyard.bury(queue) }
  }

  /// The calling thread's drain, created on first use.
  ///
  /// A thread-local word (`CPromisesSupport`), read on every settlement: `pthread_getspecific`
  /// and the lazy key behind it cost ~30 instructions per link more (Docs/Performance.md).
  @inline(__always)
  static var current: Unmanaged<Drain> {
    if let pointer = promises_get_current_drain() {
      return Unmanaged<Drain>.fromOpaque(pointer)
    }
    return makeCurrent()
  }

  /// Creates the calling thread's drain, released by the key's destructor as the thread exits.
  @inline(never)
  private static func makeCurrent() -> Unmanaged<Drain> {
    let drain = Unmanaged.passRetained(Drain())
    pthread_setspecific(key, drain.toOpaque())
    promises_set_current_drain(drain.toOpaque())
    return drain
  }

  /// Places the nodes of a promise that has just settled, under that promise's lock.
  ///
  /// `callbacks` are in registration order, each owned by the list. Placing them under the
  /// lock makes a callback registered right after the settlement queue behind them. Internal
  /// nodes only join the internal list: the caller runs them with `finishPlacing()` after
  /// unlocking.
  @usableFromInline
  static func place(_ callbacks: NodeList) {
    Drain.current._withUnsafeGuaranteedRef { $0.place(callbacks) }
  }

  /// After unlocking: dispatches the blocks that `place` or `post` deferred, then runs the
  /// internal nodes `place` collected (unless a caller further up the stack does).
  @usableFromInline
  static func finishPlacing() {
    guard let pointer = promises_get_current_drain() else { return }
    Unmanaged<Drain>.fromOpaque(pointer)._withUnsafeGuaranteedRef { $0.finishPlacing() }
  }

  /// After unlocking: what `Drain.finishPlacing()` does, on this drain.
  @usableFromInline @inline(__always)
  func finishPlacing() {
    if firstDispatch != nil || hasDisplaced { flush() }
    forwardIfNeeded()
  }

  /// Runs the internal nodes `place` collected, unless a caller further up the stack does.
  @inline(__always)
  func forwardIfNeeded() {
    if !isForwarding, !internalNodes.isEmpty { forward() }
  }

  /// Remembers a block to dispatch once the caller has unlocked (see `firstDispatch`).
  @inline(__always)
  private func deferDispatch(_ pending: PendingDispatch) {
    if firstDispatch == nil {
      firstDispatch = pending
    } else {
      moreDispatches.append(pending)
    }
  }

  /// Dispatches the deferred blocks, in the order they were deferred.
  @inline(never)
  private func flush() {
    if hasDisplaced {
      hasDisplaced = false
      displaced.removeAll(keepingCapacity: true)
    }
    if let first = firstDispatch {
      firstDispatch = nil
      Drain.dispatch(first)
    }
    guard !moreDispatches.isEmpty else { return }
    let more = moreDispatches
    moreDispatches.removeAll(keepingCapacity: true)
    for pending in more { Drain.dispatch(pending) }
  }

  /// Runs one internal node registered on an already settled promise, outside any lock.
  @usableFromInline
  func runInternal(_ node: Node) {
    internalNodes.append(node)
    forwardIfNeeded()
  }

  /// Sends one callback registered on an already settled promise to its queue's outbox.
  ///
  /// Called under that promise's lock (see `place`), or without it for a fulfilled promise
  /// (see `Promise.registerLink`); the caller calls `finishPlacing()` after unlocking. Never
  /// joins a running drain's list.
  @usableFromInline
  func post(_ node: Node, on queue: DispatchQueue) {
    let outbox = outbox(of: queue)
    if outbox.isGlobal {
      var single = NodeList()
      single.append(node)
      deferDispatch(PendingDispatch(queue: queue, outbox: nil, nodes: single))
    } else if outbox.append(node) {
      deferDispatch(PendingDispatch(queue: queue, outbox: outbox, nodes: NodeList()))
    }
  }

  /// Sorts the nodes of a settlement to where they run.
  ///
  /// Internal ones to run now, those made ready for this block's queue to this block, the
  /// others to their queue's outbox (or, for a global queue, dispatched, grouped per queue).
  /// The caller calls `finishPlacing()` after unlocking.
  @usableFromInline
  func place(_ callbacks: NodeList) {
    var callbacks = callbacks
    var batchQueue: DispatchQueue?
    var batch = NodeList()
    while let current = callbacks.popFirstUnmanaged() {
      guard let target = current._withUnsafeGuaranteedRef({ $0.queue }) else {
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
        if target !== batchQueue {
          if let batchQueue {
            deferDispatch(PendingDispatch(queue: batchQueue, outbox: nil, nodes: batch.takeAll()))
          }
          batchQueue = target
        }
        batch.append(current)
      } else if targetOutbox.append(current) {
        deferDispatch(PendingDispatch(queue: target, outbox: targetOutbox, nodes: NodeList()))
      }
    }
    if let batchQueue { deferDispatch(PendingDispatch(queue: batchQueue, outbox: nil, nodes: batch)) }
  }

  /// Fires internal nodes until the internal list is empty.
  private func forward() {
    isForwarding = true
    while let node = internalNodes.popFirst() { node.fire() }
    isForwarding = false
  }

  /// Fires one node of this block's queue and what it made ready to run at once.
  @inline(__always)
  private func fire(_ node: _PromiseNode) {
    node.fire()
    forwardIfNeeded()
  }

  /// Dispatches one deferred block.
  private static func dispatch(_ pending: PendingDispatch) {
    if let outbox = pending.outbox {
      dispatch(outbox, on: pending.queue)
    } else {
      dispatch(pending.nodes, on: pending.queue)
    }
  }

  /// Dispatches one block to `queue` that runs what `outbox` holds.
  static func dispatch(_ outbox: Outbox, on queue: DispatchQueue) {
    queue.async {
      Drain.current._withUnsafeGuaranteedRef { $0.runOutbox(outbox) }
    }
  }

  /// Runs `nodes` (each owned by the list) in one block on `queue`: for global queues, which
  /// have no outbox.
  static func dispatch(_ nodes: NodeList, on queue: DispatchQueue) {
    queue.async {
      Drain.current._withUnsafeGuaranteedRef { $0.runList(nodes) }
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
    queued = NodeList()
    // Keeps the queue object of the block alive while `queue` holds its identity.
    var blockQueue: DispatchQueue?
    var budget = Drain.batchLimit
    while true {
      if queued.isEmpty {
        let taken = outbox.takeAll()
        guard let head = taken.head else { break }
        queued = taken
        if blockQueue == nil {
          blockQueue = head._withUnsafeGuaranteedRef { $0.queue }
          self.queue = Drain.identity(blockQueue)
        }
      }
      if budget == 0 {
        // What is left goes back ahead of what arrived meanwhile; a new block takes it,
        // behind the work enqueued on the queue while this one ran.
        outbox.putBack(queued.takeAll())
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
  private func runList(_ nodes: NodeList) {
    let saved = (isActive, self.queue, self.outbox, queued)
    isActive = true
    self.outbox = nil
    let blockQueue = nodes.head.unsafelyUnwrapped._withUnsafeGuaranteedRef { $0.queue }
    self.queue = Drain.identity(blockQueue)
    queued = nodes
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
    QueueGraveyard.empty(into: &displaced)
    let outbox = Outbox.of(queue)
    if let replaced = cachedQueue { displaced.append(replaced) }
    cachedQueue = queue
    cachedOutbox = outbox
    hasDisplaced = !displaced.isEmpty
    return outbox
  }

  /// The identity `queue` is compared by.
  @inline(__always)
  static func identity(_ queue: DispatchQueue?) -> ObjectIdentifier? {
    queue.map(ObjectIdentifier.init)
  }

  /// Whether the calling thread is currently running callbacks for `queue`.
  static func isDraining(_ queue: DispatchQueue) -> Bool {
    guard let pointer = promises_get_current_drain() else { return false }
    return Unmanaged<Drain>.fromOpaque(pointer)._withUnsafeGuaranteedRef { drain in
      drain.isActive && drain.queue == ObjectIdentifier(queue)
    }
  }
}

/// Queues cached by threads that have exited, released by the next thread that looks up an
/// outbox outside its cache (see `Drain.deinit`): at most one per exited thread waits here.
enum QueueGraveyard {
  /// The buried queues.
  static let buried = LockedBox<[DispatchQueue]>([])
  /// Whether `buried` may be non-empty; lets `empty()` skip the lock.
  static let isOccupied = Atomic<Bool>(false)

  static func bury(_ queue: DispatchQueue) {
    buried.withLock { queues in
      queues.append(queue)
      isOccupied.store(true, ordering: .releasing)
    }
  }

  /// Moves the buried queues into `queues`, for the caller to release after unlocking.
  @inline(__always)
  static func empty(into queues: inout ContiguousArray<DispatchQueue>) {
    guard isOccupied.load(ordering: .relaxed) else { return }
    buried.withLock { buried in
      queues.append(contentsOf: buried)
      buried.removeAll(keepingCapacity: true)
      isOccupied.store(false, ordering: .relaxed)
    }
  }
}
