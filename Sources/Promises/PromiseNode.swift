import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The non-generic base of every promise; an implementation detail with no public members.
///
/// A promise returned by `then`, `recover`, `catch` and friends is also the callback record
/// that its source promise keeps: the link costs one object, not a promise plus a closure box.
/// Nodes are linked intrusively through `next`, first in their source's callback list and then
/// in a drain's run list, so registering and scheduling a callback allocate nothing.
///
/// Thread safety: `link` is owned by whoever currently holds the node — the
/// source promise's lock while the node waits in its callback list, then the single drain
/// that runs it. A node is in at most one list at a time and fires once per registration,
/// so these fields are never touched by two threads at once; the hand-offs between owners
/// go through a lock release/acquire or `DispatchQueue.async`, which order the accesses.
///
/// Ownership: a list owns one strong reference to each node in it, taken when the node is
/// registered (`Unmanaged.passRetained`) and given back when a drain fires it. The links
/// themselves are unmanaged, so moving a node from its promise's list to a drain's list and
/// through the drain costs no reference counting.
public class _PromiseNode: @unchecked Sendable {
  /// The next node in the list this node is in (the list owns it; see the class note).
  @usableFromInline @exclusivity(unchecked) final var link: Unmanaged<_PromiseNode>?
  /// The queue the node's callback runs on; `nil` for internal forwarding that runs inline.
  @usableFromInline @exclusivity(unchecked) final var queue: DispatchQueue?

  @usableFromInline
  init(queue: DispatchQueue?) {
    self.queue = queue
  }

  /// The next node in the list this node is in, for walks that do not change the list.
  final var next: _PromiseNode? { link?.takeUnretainedValue() }

  /// Runs the callback once the promise it was registered on has settled.
  ///
  /// Every node kind that is ever registered must override it: the default traps, since a
  /// node that silently did nothing would leave whoever waits on it hanging.
  /// - Returns: The callbacks of a promise the node settled that the caller (the drain that
  ///   fired it) must schedule, or `nil` when there are none or they were scheduled already.
  func fire() -> Unmanaged<_PromiseNode>? {
    preconditionFailure(
      "Promises: \(type(of: self)) is registered as a callback but does not override fire()")
  }

  /// Called by `register` before the node is linked: nodes that are not promises remember
  /// their source here (a promise node already knows it as its `upstream`).
  func willRegister(on source: _PromiseNode) {}

  /// Cancels this promise on behalf of a downstream promise that was cancelled, when it is
  /// pending and the caller is its only observer; returns the next promise upstream to visit.
  func cancelFromDownstream() -> _PromiseNode? { nil }

  /// Whether this node still waits for the promise it is registered on.
  ///
  /// A cancelled promise, a finished aggregate's input or a timed-out `wait` no longer does;
  /// `cancelFromDownstream` cancels upstream work only when no live observer is left.
  var isLiveObserver: Bool { true }

  /// Several upstream nodes (for aggregates); `nil` for nodes with at most one.
  var upstreamMembers: [_PromiseNode]? { nil }

  /// Reports, for walks up a chain, whether the promise is pending, its queue and upstream.
  ///
  /// Nodes that are not promises report settled.
  func walkStep() -> (pending: Bool, queue: DispatchQueue?, upstream: _PromiseNode?) {
    (false, nil, nil)
  }

  /// Visits every pending node that `start` waits on, transitively (through adopted promises,
  /// sources and the inputs of aggregates), until `visit` returns `true`.
  ///
  /// See `UpstreamWalk` for the order and how a loop ends the walk. `limit` bounds the number
  /// of nodes visited (`nil`: no bound).
  /// - Returns: Whether `visit` returned `true`.
  static func walkUpstream(
    from start: _PromiseNode, limit: Int? = nil,
    _ visit: (_PromiseNode, DispatchQueue?) -> Bool
  ) -> Bool {
    var walk = UpstreamWalk(from: start)
    var steps = 0
    while let (node, queue) = walk.next() {
      if visit(node, queue) { return true }
      steps += 1
      if let limit, steps >= limit { return false }
    }
    return false
  }

  /// What waits on a callback node's outcome, for the walk downstream of the cycle check.
  enum Downstream {
    /// Nothing: the node ends the chain (a waiter, an awaiting task).
    case none
    /// This node, which is settled by the node's source (directly or through its work).
    case node(_PromiseNode)
    /// The walk cannot tell: the cycle check falls back to walking upstream only.
    case unknown
  }

  /// What waits on this node's outcome once it fires (see `Downstream`).
  ///
  /// A node kind that does not say is `.unknown`, which is always safe.
  var downstream: Downstream { .unknown }

  /// Calls `body` with the callbacks waiting on this promise, under its lock; nothing for
  /// nodes that are not promises.
  func forEachWaitingCallback(_ body: (_PromiseNode) -> Void) {}
}

// MARK: - Scheduling

/// Runs nodes whose source settled: on their queue, batching same-queue work in one block.
///
/// Each thread has one `Drain`, with two run lists.
///
/// - Queue nodes (user callbacks). While a dispatched block for queue `Q` runs, the drain is
///   "active on Q": nodes that become ready for `Q` (a chain of `then(on: Q)` links settling
///   one after the other) join its queue list and run in the same block, in order, after the
///   callback that made them ready — instead of costing one `Q.async` each. Nodes for other
///   queues are dispatched, one block per queue per settlement.
/// - Internal nodes (`queue == nil`: adoption, aggregates, waiters, awaiters) run at once,
///   inside the settle that made them ready, so a waiter wakes while the callback that
///   fulfilled its promise is still running. A settle made by an internal node only appends
///   to the internal list, which the outermost settle on this thread empties in a loop: any
///   chain of adoptions settles on a flat stack.
///
/// Callbacks are never synchronous from the registering call's point of view: a node joins a
/// run list only when its source settles, and a node registered on a promise that has
/// already settled is always dispatched with `Q.async` (appending it to a running drain could
/// let it overtake earlier callbacks of the same promise still queued in another block). A
/// drain runs until its lists are empty; it never stops early, so work left over can never be
/// reordered behind blocks that arrived on the queue meanwhile.
@usableFromInline
final class Drain {
  /// A node in a run list, which owns one reference to it.
  @usableFromInline typealias Node = Unmanaged<_PromiseNode>

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
  /// starting and ending a block does not retain and release the queue object, whose
  /// reference count the threads creating callbacks for it are changing at the same time.
  @exclusivity(unchecked) var queue: ObjectIdentifier?
  @exclusivity(unchecked) var isActive = false
  /// Nodes for `queue`, run in this block.
  @exclusivity(unchecked) var queued = RunList()
  /// Internal nodes (`queue == nil`), run at once.
  @exclusivity(unchecked) var internalNodes = RunList()
  /// The internal list is being emptied further up this thread's stack.
  @exclusivity(unchecked) var isForwarding = false

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

  /// The calling thread's drain, created on first use.
  static var current: Unmanaged<Drain> {
    if let pointer = pthread_getspecific(key) {
      return Unmanaged<Drain>.fromOpaque(pointer)
    }
    let drain = Unmanaged.passRetained(Drain())
    pthread_setspecific(key, drain.toOpaque())
    return drain
  }

  /// Fires queue nodes until the queue list is empty.
  func run() {
    // Each node's reference moves from the list to `node` and is dropped after it fired.
    while let node = queued.popFirst() {
      if let callbacks = node.fire() { enqueueFromFire(callbacks) }
    }
  }

  /// Schedules the callbacks a node fired by this drain handed back (what `schedule` does,
  /// without looking up the thread's drain).
  @inline(__always)
  private func enqueueFromFire(_ first: Node) {
    // The common case, the next link of a chain on this queue: straight onto the run list.
    if isActive, first._withUnsafeGuaranteedRef({ $0.link == nil && Drain.identity($0.queue) == queue }) {
      queued.append(first)
      return
    }
    enqueue(first)
    if !isForwarding, !internalNodes.isEmpty { forward() }
  }

  /// Fires internal nodes until the internal list is empty.
  private func forward() {
    isForwarding = true
    while let node = internalNodes.popFirst() {
      if let callbacks = node.fire() { enqueue(callbacks) }
    }
    isForwarding = false
  }

  /// Schedules the nodes of a settled promise (`first`, linked in registration order, each
  /// owned by the list).
  @usableFromInline
  static func schedule(_ first: Node) {
    Drain.current._withUnsafeGuaranteedRef { drain in
      drain.enqueue(first)
      if !drain.isForwarding, !drain.internalNodes.isEmpty { drain.forward() }
    }
  }

  /// Sorts the nodes: internal ones to run now, same-queue ones to this block, the others
  /// dispatched, grouped per queue.
  private func enqueue(_ first: Node) {
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
      } else if target === batchQueue {
        batch.append(current)
      } else {
        if let head = batch.head, let batchQueue { Drain.dispatch(head, on: batchQueue) }
        batchQueue = target
        batch = RunList()
        batch.append(current)
      }
    }
    if let head = batch.head, let batchQueue { Drain.dispatch(head, on: batchQueue) }
  }

  /// Runs `first` (and the nodes linked after it, each owned by the list) in one block on
  /// `queue`.
  static func dispatch(_ first: Node, on queue: DispatchQueue) {
    // The block captures only the node pointer (its queue is `first.queue`): a small context.
    queue.async {
      Drain.current._withUnsafeGuaranteedRef { $0.runBlock(first) }
    }
  }

  private func runBlock(_ first: Node) {
    // A block can start on a thread whose drain is busy only through nested execution
    // (for instance a callback that runs a queue's work synchronously); keep that drain's
    // list aside and restore it afterwards so neither list is reordered.
    let saved = (isActive, self.queue, queued)
    isActive = true
    var last = first
    first._withUnsafeGuaranteedRef { node in
      self.queue = Drain.identity(node.queue)
      while let next = last._withUnsafeGuaranteedRef({ $0.link }) { last = next }
    }
    queued = RunList(head: first, tail: last)
    run()
    (isActive, self.queue, queued) = saved
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

// MARK: - Lock

/// A tiny spin lock on an atomic byte, stored inline in each promise (no allocation).
///
/// ThreadSanitizer sees its acquire/release atomics, unlike the futex hand-off of a
/// contended `Synchronization.Mutex` on Linux. Critical sections never run user code and
/// are a few loads and stores long; a waiter yields the CPU after a short spin.
@usableFromInline
struct SpinLock: ~Copyable {
  @usableFromInline let word = Atomic<UInt8>(0)

  @usableFromInline
  init() {}

  @inlinable
  func lock() {
    if word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged { return }
    lockSlow()
  }

  @usableFromInline @inline(never)
  func lockSlow() {
    var spins = 0
    while true {
      if word.load(ordering: .relaxed) == 0,
        word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged
      {
        return
      }
      spins += 1
      if spins > 64 {
        sched_yield()
        spins = 0
      }
    }
  }

  @inlinable
  func unlock() {
    word.store(0, ordering: .releasing)
  }
}
