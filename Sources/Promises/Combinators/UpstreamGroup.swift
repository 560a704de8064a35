import Dispatch
import Synchronization

/// Several upstream promises, for cancelling the inputs of an aggregate together.
class UpstreamGroup: _PromiseNode, @unchecked Sendable {
  // Safety: `stored` is immutable.
  private let stored: [_PromiseNode]

  init(_ members: [_PromiseNode]) {
    self.stored = members
    super.init(queue: nil)
  }

  /// The upstream promises; read only to cancel them or to walk the chain (rare).
  var members: [_PromiseNode] { stored }

  override func cancelFromDownstream() -> _PromiseNode? {
    for member in members {
      Promise<Void>.propagateCancellation(from: member)
    }
    return nil
  }

  override var upstreamMembers: [_PromiseNode]? { members }
}

/// An `UpstreamGroup` that keeps the typed array it was given.
///
/// Converting `[Promise<Value>]` to `[_PromiseNode]` in unspecialized code costs an
/// element-by-element cast; the conversion is deferred to the rare reads of `members`.
final class TypedUpstreamGroup<Value: Sendable>: UpstreamGroup, @unchecked Sendable {
  // Safety: `promises` is immutable.
  private let promises: [Promise<Value>]

  init(_ promises: [Promise<Value>]) {
    self.promises = promises
    super.init([])
  }

  override var members: [_PromiseNode] { promises.map { $0 } }
}
