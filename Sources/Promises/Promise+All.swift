import Dispatch

/// Several upstream promises, for cancelling the inputs of an aggregate together.
final class UpstreamGroup: _PromiseNode, @unchecked Sendable {
  // Safety: `members` is immutable.
  let members: [_PromiseNode]

  init(_ members: [_PromiseNode]) {
    self.members = members
    super.init(queue: nil)
  }

  override func cancelFromDownstream() -> _PromiseNode? {
    for member in members {
      Promise<Void>.propagateCancellation(from: member)
    }
    return nil
  }
}

/// Calls `action` inline with the outcome of the promise it is registered on.
///
/// The building block of aggregates (`all`, `race`, `any`, …): internal forwarding that runs
/// wherever the input settles, through the drain, without a dispatch of its own.
final class ForwardingNode<Input: Sendable>: _PromiseNode, @unchecked Sendable {
  // Safety: `action` is set at init and `source` by `register` before the node is published;
  // both are released by the single firing thread.
  private var action: (@Sendable (Result<Input, any Error>) -> Void)?
  private var source: Promise<Input>?

  init(_ action: @escaping @Sendable (Result<Input, any Error>) -> Void) {
    self.action = action
    super.init(queue: nil)
  }

  override func willRegister(on source: _PromiseNode) {
    self.source = unsafeDowncast(source, to: Promise<Input>.self)
  }

  override func fire() {
    let source = self.source.unsafelyUnwrapped
    self.source = nil
    let action = self.action.unsafelyUnwrapped
    self.action = nil
    action(source.settledResult)
  }
}

/// The promise behind `Promise.all([...])`: counts fulfilled inputs, keeps input order.
final class AllPromise<Element: Sendable>: Promise<[Element]>, @unchecked Sendable {
  // Safety: `values` and `remaining` are guarded by `lock`.
  private var values: [Element?]
  private var remaining: Int

  init(count: Int, file: StaticString, line: UInt) {
    values = Array(repeating: nil, count: count)
    remaining = count
    super.init(queue: nil, file: file, line: line)
  }

  func receive(_ result: Result<Element, any Error>, at index: Int) {
    switch result {
    case .failure(let error):
      settle(error: error)
    case .success(let value):
      lock.lock()
      guard state.isPending else {
        lock.unlock()
        return
      }
      values[index] = value
      remaining -= 1
      let done = remaining == 0
      lock.unlock()
      if done {
        lock.lock()
        let collected = values.map { $0.unsafelyUnwrapped }
        values = []
        lock.unlock()
        settle(value: collected)
      }
    }
  }
}

extension Promise {
  /// Returns a promise of all the values, in input order, once every promise is fulfilled.
  ///
  /// The first rejection rejects the result at once with that error; the other inputs keep
  /// running (cancel the returned promise to cancel the inputs nobody else waits on).
  /// An empty array gives a promise fulfilled with `[]`.
  ///
  /// - Parameter promises: The promises to wait for.
  /// - Returns: A promise of their values, in the order of `promises`.
  public static func all(
    _ promises: [Promise<Value>], file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<[Value]> {
    if promises.isEmpty { return Promise<[Value]>([], file: file, line: line) }
    let aggregate = AllPromise<Value>(count: promises.count, file: file, line: line)
    aggregate.upstream = UpstreamGroup(promises)
    for (index, promise) in promises.enumerated() {
      promise.register(ForwardingNode { [aggregate] result in aggregate.receive(result, at: index) })
    }
    return aggregate
  }

  /// Returns a promise that settles when every input has, with every outcome in input order.
  ///
  /// Never rejected by an input's rejection: each `Result` says how that input ended.
  ///
  /// - Parameter promises: The promises to wait for.
  /// - Returns: A promise of their outcomes, in the order of `promises`.
  public static func allSettled(
    _ promises: [Promise<Value>], file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<[Result<Value, any Error>]> {
    let wrapped = promises.map { promise -> Promise<Result<Value, any Error>> in
      let (outcome, resolver) = Promise<Result<Value, any Error>>.pending(file: file, line: line)
      outcome.upstream = promise
      promise.register(ForwardingNode { result in resolver.fulfill(result) })
      return outcome
    }
    return Promise<Result<Value, any Error>>.all(wrapped, file: file, line: line)
  }

  /// Settles this promise with the outcome of `source` (inline forwarding, no dispatch).
  func follow(_ source: Promise<Value>) {
    source.register(ForwardingNode { [self] result in self.settle(result) })
  }
}

extension Promise where Value == Void {
  /// Returns a promise of a tuple of the values of promises of different types.
  ///
  /// `Promise.all(user, settings, avatar)` gives a `Promise<(User, Settings, Avatar)>` once all
  /// three are fulfilled; the first rejection rejects it with that error.
  ///
  /// - Parameter promises: The promises to wait for, of any types and any number.
  /// - Returns: A promise of their values as a tuple, in argument order.
  public static func all<each Element: Sendable>(
    _ promises: repeat Promise<each Element>, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<(repeat each Element)> {
    var erased: [Promise<Void>] = []
    for promise in repeat each promises {
      erased.append(completion(of: promise, file: file, line: line))
    }
    let (tuple, resolver) = Promise<(repeat each Element)>.pending(file: file, line: line)
    let gate = Promise<Void>.all(erased, file: file, line: line)
    tuple.upstream = gate
    gate.register(
      ForwardingNode<[Void]> { [resolver] result in
        switch result {
        case .failure(let error): resolver.reject(error)
        case .success:
          resolver.fulfill((repeat (each promises).settledValue))
        }
      })
    return tuple
  }

  /// A `Promise<Void>` settled inline when `promise` settles, its value dropped.
  static func completion<Input>(
    of promise: Promise<Input>, file: StaticString, line: UInt
  ) -> Promise<Void> {
    let (done, resolver) = Promise<Void>.pending(file: file, line: line)
    done.upstream = promise
    promise.register(ForwardingNode<Input> { result in resolver.resolve(result.map { _ in () }) })
    return done
  }
}
