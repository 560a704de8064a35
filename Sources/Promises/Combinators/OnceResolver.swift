import Foundation

/// Holds the resolver of a combinator's result until the result settles, then lets it go, and
/// retires the forwarding nodes that wait for the result's inputs.
///
/// The one "take the resolver once" type behind `race`, `any`, `timeout` and `delay`. The
/// inputs' forwarding nodes hold this small box rather than the result itself, so inputs still
/// pending after the result has settled (the losers of a race) do not keep it alive. Emptying
/// the box retires those nodes: an input that nobody else waits on can then be cancelled
/// (`ForwardingNode.retire()`), whether the result was cancelled or decided.
final class OnceResolver<Value: Sendable>: Sendable {
  /// What `take` empties is handed to the caller and released after unlocking.
  private let state: LockedBox<State>

  private struct State: Sendable {
    var resolver: Promise<Value>.Resolver?
    /// The nodes waiting on the inputs, each with its input; its capacity is reserved up
    /// front, so tracking a node never allocates under the lock.
    var nodes: [(node: ForwardingNode<Value>, input: Promise<Value>)]
  }

  /// Creates a box for `resolver` that will track the nodes of `inputs` inputs.
  init(_ resolver: Promise<Value>.Resolver, inputs: Int = 1) {
    var nodes: [(node: ForwardingNode<Value>, input: Promise<Value>)] = []
    nodes.reserveCapacity(inputs)
    state = LockedBox(State(resolver: resolver, nodes: nodes))
  }

  /// Keeps `node` a live observer of its input until the box is emptied; returns `node`.
  ///
  /// Call before registering the node. The box and the node then reference each other until
  /// the box is emptied or the node fires.
  func track(_ node: ForwardingNode<Value>, on input: Promise<Value>) -> ForwardingNode<Value> {
    let tracked = state.withLock { state in
      guard state.resolver != nil else { return false }
      state.nodes.append((node, input))
      return true
    }
    if !tracked { node.retire() }
    return node
  }

  /// Registers on `input` a tracked node that calls `receive` with its outcome, inline.
  func forward(
    from input: Promise<Value>, to receive: @escaping @Sendable (Result<Value, any Error>) -> Void
  ) {
    input.register(track(ForwardingNode<Value>(receive), on: input))
  }

  /// Registers on each of `inputs` a tracked node that calls `receive` with the input's index
  /// and outcome, inline.
  ///
  /// Every node is tracked before the first is registered: an input settled already fires its
  /// node during registration, and the box must then retire the others.
  func forward(
    from inputs: [Promise<Value>],
    to receive: @escaping @Sendable (Int, Result<Value, any Error>) -> Void
  ) {
    let nodes = inputs.indices.map { index in
      track(ForwardingNode<Value> { outcome in receive(index, outcome) }, on: inputs[index])
    }
    for (input, node) in zip(inputs, nodes) {
      input.register(node)
    }
  }

  /// Empties the box when `result` is cancelled, so the inputs can be cancelled in turn.
  func take(whenCancelled result: Promise<Value>) {
    result.addCancelHandler { [weak self] in _ = self?.take() }
  }

  /// Settles the result with `outcome` unless it has been settled through this box already.
  func resolve(_ outcome: Result<Value, any Error>) {
    take()?.resolve(outcome)
  }

  /// Takes the resolver out of the box (once; `nil` afterwards) and retires the nodes.
  func take() -> Promise<Value>.Resolver? {
    let (resolver, nodes) = state.withLock { state in
      defer {
        state.resolver = nil
        state.nodes = []
      }
      return (state.resolver, state.nodes)
    }
    // Retired nodes leave their inputs at once: an input that stays pending (a race's loser,
    // a shared promise given many timeouts) must not pile them up.
    for (node, input) in nodes {
      node.retire()
      input.unregister(node)
    }
    return resolver
  }
}
