import Synchronization

/// The state of `Promise.any`: the errors so far, in input order, beside the box that holds
/// the result's resolver (`OnceResolver`).
///
/// Finishing (a value, the last rejection or a cancellation) empties the box, which releases
/// the resolver and retires the inputs' forwarding nodes, so inputs that nobody else waits on
/// can be cancelled. The errors take no lock: each input writes its own slot.
final class AnyAggregate<Value: Sendable>: @unchecked Sendable {
  // Safety: slot `index` of `errors` is written at most once, by the node of input `index`
  // (one node per index, fired once), before that node decrements `remaining`. The
  // decrement that reaches zero (acquiring and releasing) therefore sees every slot written,
  // and only that thread reads them. `deinit` runs after every node has released the
  // aggregate.
  /// The result's resolver and the inputs' nodes.
  let once: OnceResolver<Value>
  private let errors: UnsafeMutablePointer<(any Error)?>
  private let count: Int
  private let remaining: Atomic<Int>

  init(count: Int, resolver: Promise<Value>.Resolver) {
    once = OnceResolver(resolver, inputs: count)
    errors = UnsafeMutablePointer<(any Error)?>.allocate(capacity: count)
    errors.initialize(repeating: nil, count: count)
    self.count = count
    remaining = Atomic(count)
  }

  deinit {
    errors.deinitialize(count: count)
    errors.deallocate()
  }

  /// Settles the result with a value; records a rejection, rejecting the result at the last.
  func receive(_ outcome: Result<Value, any Error>, at index: Int) {
    switch outcome {
    case .success:
      once.resolve(outcome)
    case .failure(let error):
      errors[index] = error
      guard remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
      let collected = UnsafeMutableBufferPointer(start: errors, count: count).map {
        $0.unsafelyUnwrapped
      }
      once.take()?.reject(PromiseError.allRejected(collected))
    }
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
    aggregate.once.take(whenCancelled: first)
    aggregate.once.forward(from: promises) { [aggregate] index, outcome in
      aggregate.receive(outcome, at: index)
    }
    return first
  }
}
