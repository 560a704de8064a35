import Dispatch

/// The non-generic base of every promise; an implementation detail with no public members.
///
/// A promise returned by `then`, `recover`, `catch` and friends is also the callback record
/// that its source promise keeps: the link costs one object, not a promise plus a closure box.
/// Nodes are linked intrusively through `link` (see `NodeList`), first in their source's
/// callback list and then in a drain's run list or a queue's outbox, so registering and
/// scheduling a callback allocate nothing.
///
/// Thread safety and ownership: `link` belongs to the list the node is in, and only that
/// list's owner touches it; a list owns one reference to each of its nodes (Docs/Design.md,
/// "Invariants", I5). `queue` is written at init and, for a link that starts adopting, by the
/// thread firing it (I3).
public class _PromiseNode: @unchecked Sendable {
  /// The next node in the list this node is in (the list owns it: Docs/Design.md, I5).
  @usableFromInline @exclusivity(unchecked) final var link: Unmanaged<_PromiseNode>?
  /// The queue the node's callback runs on; `nil` for internal forwarding that runs inline.
  ///
  /// For the result of a combinator that runs work of its own (`after`, `delay`, `timeout`,
  /// `retry`, `all(maxConcurrent:)`), never registered as a callback: the queue that work runs
  /// on, reported to walks up the chain (see `Promise.pending(needing:upstream:file:line:)`).
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
  /// node that silently did nothing would leave whoever waits on it hanging. What the node
  /// settles places its own callbacks (see `Promise.fulfill`).
  func fire() {
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

  /// Whether this node is a promise that has not settled, read under its lock; `false` for
  /// nodes that are not promises. (A rejection from outside a link asks it of the link's
  /// source: see `Promise.reject`.)
  var isPendingPromise: Bool { false }

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
