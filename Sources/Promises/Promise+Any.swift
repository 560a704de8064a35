import Foundation

/// The state of `Promise.any`: the errors so far, in input order, and the result's resolver.
///
/// Finishing (a value, the last rejection or a cancellation) releases the resolver and retires
/// the inputs' forwarding nodes, so inputs that nobody else waits on can be cancelled.
final class AnyAggregate<Value: Sendable>: @unchecked Sendable {
  // Safety: every `var` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var resolver: Promise<Value>.Resolver?
  private var errors: [(any Error)?]
  private var remaining: Int
  /// The nodes waiting on the inputs, each with its input.
  private var nodes: [(node: ForwardingNode<Value>, input: Promise<Value>)] = []

  init(count: Int, resolver: Promise<Value>.Resolver) {
    self.resolver = resolver
    errors = Array(repeating: nil, count: count)
    remaining = count
  }

  /// Keeps `node` a live observer of its input until the aggregate finishes; returns `node`.
  func track(_ node: ForwardingNode<Value>, on input: Promise<Value>) -> ForwardingNode<Value> {
    let tracked = lock.withLock {
      guard resolver != nil else { return false }
      nodes.append((node, input))
      return true
    }
    if !tracked { node.retire() }
    return node
  }

  func receive(_ outcome: Result<Value, any Error>, at index: Int) {
    switch outcome {
    case .success:
      take()?.resolve(outcome)
    case .failure(let error):
      let collected: [any Error]? = lock.withLock {
        guard resolver != nil else { return nil }
        errors[index] = error
        remaining -= 1
        guard remaining == 0 else { return nil }
        return errors.map { $0.unsafelyUnwrapped }
      }
      if let collected {
        take()?.reject(PromiseError.allRejected(collected))
      }
    }
  }

  /// Takes the resolver out (once), drops the collected errors and retires the nodes.
  func take() -> Promise<Value>.Resolver? {
    let (resolver, nodes) = lock.withLock {
      defer {
        self.resolver = nil
        self.errors = []
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
  /// Returns a promise fulfilled with the first value among `promises`, ignoring rejections
  /// until every input has been rejected.
  ///
  /// Rejections do not decide the outcome: only when all inputs are rejected is the result
  /// rejected, with `PromiseError.allRejected` carrying every error in input order (not in
  /// the order they happened). An empty array gives `PromiseError.allRejected([])` at once.
  /// The other inputs keep running after the first value; cancelling the returned promise
  /// cancels every input that nothing else waits on. To take the first outcome, value or
  /// error, use `Promise.race`.
  ///
  /// - Parameters:
  ///   - promises: The promises to take the first value from.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the first value, or of an `allRejected` error.
  public static func any(
    _ promises: [Promise<Value>], file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<Value> {
    guard !promises.isEmpty else {
      return Promise(error: PromiseError.allRejected([]), file: file, line: line)
    }
    let (first, resolver) = Promise<Value>.pending(file: file, line: line)
    first.upstream = UpstreamGroup(promises)
    let aggregate = AnyAggregate(count: promises.count, resolver: resolver)
    first.addCancelHandler { [weak aggregate] in _ = aggregate?.take() }
    let nodes = promises.indices.map { index in
      aggregate.track(
        ForwardingNode<Value> { [aggregate] outcome in aggregate.receive(outcome, at: index) },
        on: promises[index])
    }
    for (promise, node) in zip(promises, nodes) {
      promise.register(node)
    }
    return first
  }
}
