import Foundation

/// Holds the resolver of a combinator's result until the result settles, then lets it go, and
/// retires the forwarding nodes that wait for the result's inputs.
///
/// The inputs' forwarding nodes hold this small box rather than the result itself, so inputs
/// still pending after the result has settled (the losers of a race) do not keep it alive.
/// Emptying the box retires those nodes: an input that nobody else waits on can then be
/// cancelled (`ForwardingNode.retire()`), whether the result was cancelled or decided.
final class OnceResolver<Value: Sendable>: @unchecked Sendable {
  // Safety: `resolver` and `nodes` are only accessed while `lock` is held.
  private let lock = NSLock()
  private var resolver: Promise<Value>.Resolver?
  /// The nodes waiting on the inputs, each with its input.
  private var nodes: [(node: ForwardingNode<Value>, input: Promise<Value>)] = []

  init(_ resolver: Promise<Value>.Resolver) {
    self.resolver = resolver
  }

  /// Keeps `node` a live observer of its input until the box is emptied; returns `node`.
  ///
  /// Call before registering the node. The box and the node then reference each other until
  /// the box is emptied or the node fires.
  func track(_ node: ForwardingNode<Value>, on input: Promise<Value>) -> ForwardingNode<Value> {
    let tracked = lock.withLock {
      guard resolver != nil else { return false }
      nodes.append((node, input))
      return true
    }
    if !tracked { node.retire() }
    return node
  }

  /// Settles the result with `outcome` unless it has been settled through this box already.
  func resolve(_ outcome: Result<Value, any Error>) {
    take()?.resolve(outcome)
  }

  /// Takes the resolver out of the box (once; `nil` afterwards) and retires the nodes.
  func take() -> Promise<Value>.Resolver? {
    let (resolver, nodes) = lock.withLock {
      defer {
        self.resolver = nil
        self.nodes = []
      }
      return (self.resolver, self.nodes)
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

extension Promise {
  /// Returns a promise settled like the first of `promises` to settle, fulfilled or rejected.
  ///
  /// The first outcome wins, whether a value or an error; to wait for the first *value*,
  /// use `Promise.any`. The other inputs keep running after the race is decided — cancel them
  /// yourself if their work should stop. Cancelling the returned promise cancels every input
  /// that nothing else waits on. An empty array gives a promise rejected with
  /// `PromiseError.emptyRace`, since nothing could ever settle it.
  ///
  /// - Parameters:
  ///   - promises: The competing promises.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise with the outcome of the first input to settle.
  public static func race(
    _ promises: [Promise<Value>], file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<Value> {
    guard !promises.isEmpty else {
      let site = CreationSite(file, UInt32(truncatingIfNeeded: line))
      return Promise(error: PromiseError.emptyRace(createdAt: site), file: file, line: line)
    }
    let (winner, resolver) = Promise<Value>.pending(file: file, line: line)
    winner.upstream = UpstreamGroup(promises)
    let box = OnceResolver(resolver)
    winner.addCancelHandler { [weak box] in _ = box?.take() }
    let nodes = promises.map { promise in
      box.track(ForwardingNode<Value> { [box] outcome in box.resolve(outcome) }, on: promise)
    }
    for (promise, node) in zip(promises, nodes) {
      promise.register(node)
    }
    return winner
  }
}
