import Dispatch
import Synchronization

/// Calls `action` inline with the outcome of the promise it is registered on.
///
/// The building block of aggregates (`all`, `race`, `any`, …): internal forwarding that runs
/// wherever the input settles, through the drain, without a dispatch of its own.
final class ForwardingNode<Input: Sendable>: _PromiseNode, @unchecked Sendable {
  // Safety: `action` is set at init and `source` by `register` before the node is published;
  // both are released by the single firing thread.
  private var action: (@Sendable (Result<Input, any Error>) -> Void)?
  private var source: Promise<Input>?

  /// The promise this node settles, if it holds one: the node is a live observer exactly while
  /// its owner is (see `isLiveObserver`).
  private let owner: _PromiseNode?

  /// Creates a node that calls `action` with the outcome.
  ///
  /// Pass the promise the node settles as `owner`: then the node keeps its source's work
  /// from being cancelled exactly while the owner still waits. A node without an owner (the
  /// combinators whose inputs must not keep their result alive: `race`, `any`, `timeout`,
  /// `delay`, `retry` and the fan-out) counts as waiting until its combinator calls
  /// `retire()`, which each of them does when its result settles or is cancelled: until
  /// then, cancelling another branch on the same input must not cancel it.
  init(owner: _PromiseNode? = nil, _ action: @escaping @Sendable (Result<Input, any Error>) -> Void) {
    self.owner = owner
    self.action = action
    super.init(queue: nil)
  }

  /// Set by the owner once the outcome is no longer needed (see `retire()`).
  private let retired = Atomic<Bool>(false)

  override func willRegister(on source: _PromiseNode) {
    self.source = unsafeDowncast(source, to: Promise<Input>.self)
  }

  /// Marks the node as no longer waiting: its owner is done (a race decided, a timeout
  /// fired), so it does not keep its source's work from being cancelled.
  func retire() {
    retired.store(true, ordering: .releasing)
  }

  override var isLiveObserver: Bool {
    guard !retired.load(ordering: .acquiring) else { return false }
    return owner?.isLiveObserver ?? true
  }

  // Without an owner, what the action settles is out of sight.
  override var downstream: Downstream { owner.map(Downstream.node) ?? .unknown }

  override func fire() {
    let source = self.source.unsafelyUnwrapped
    self.source = nil
    let action = self.action.unsafelyUnwrapped
    self.action = nil
    action(source.settledResult)
  }
}
