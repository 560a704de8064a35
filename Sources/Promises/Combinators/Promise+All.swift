import Dispatch
import Synchronization

/// The promise behind `Promise.all([...])`: counts fulfilled inputs, keeps input order.
///
/// Values go straight into a buffer of `Element` (no `Optional<Element>` or `Result`, whose
/// metadata unspecialized code would look up per element); `filled` records which slots are
/// initialized so a rejected aggregate can clean up. Both are raw buffers, not arrays: in
/// unspecialized code an array write costs a uniqueness check and an exclusivity check.
///
/// The lock guards only the slot writes and the count. The receiver that brings `remaining`
/// to zero owns the buffer from then on: no other receiver writes a slot (each sees
/// `remaining == 0`), a rejection does not touch the buffer, and `deinit`, which cannot run
/// while a receiver holds the aggregate, leaves the slots to it. So the result array is
/// allocated, and the values moved into it, after unlocking.
final class AllPromise<Element: Sendable>: Promise<[Element]>, @unchecked Sendable {
  // Safety: the buffers' contents and `remaining` are guarded by `lock` while `remaining > 0`;
  // once it is 0, the buffer belongs to the receiver that made it so (see above).
  private let buffer: UnsafeMutablePointer<Element>
  private let filled: UnsafeMutablePointer<Bool>
  private let count: Int
  @exclusivity(unchecked) private var remaining: Int

  init(count: Int, file: StaticString, line: UInt) {
    self.buffer = UnsafeMutablePointer<Element>.allocate(capacity: count)
    self.filled = UnsafeMutablePointer<Bool>.allocate(capacity: count)
    self.filled.initialize(repeating: false, count: count)
    self.count = count
    self.remaining = count
    super.init(queue: nil, file: file, line: line)
  }

  deinit {
    // At 0 the last receiver has moved every value out: the slots are uninitialized.
    if remaining > 0 {
      for index in 0..<count where filled[index] {
        (buffer + index).deinitialize(count: 1)
      }
    }
    buffer.deallocate()
    filled.deallocate()
  }

  /// Records input `index`'s value; fulfils the aggregate with the last one.
  ///
  /// Cost under the lock: one slot write and a decrement; no allocation.
  func receive(_ value: Element, at index: Int) {
    lock.lock()
    guard state.isPending, remaining > 0, !filled[index] else {
      lock.unlock()
      return
    }
    (buffer + index).initialize(to: value)
    filled[index] = true
    remaining -= 1
    let isLast = remaining == 0
    lock.unlock()
    guard isLast else { return }
    // This receiver owns the buffer now (see the class's note): move the values out. Should
    // a rejection have settled the aggregate meanwhile, `fulfill` ignores them and they are
    // released with the array.
    let values = Array(unsafeUninitializedCapacity: count) { target, initialized in
      _ = target.moveInitialize(fromContentsOf: UnsafeMutableBufferPointer(start: buffer, count: count))
      initialized = count
    }
    fulfill(values)
  }
}

/// One input of `Promise.all`: forwards its source's outcome to the aggregate, inline.
final class AllInputNode<Element: Sendable>: _PromiseNode, @unchecked Sendable {
  // Safety: `source` is set by `register` before the node is published and released by the
  // single firing thread; `aggregate` and `index` are constants.
  private let aggregate: AllPromise<Element>
  private let index: Int
  private var source: Promise<Element>?

  init(aggregate: AllPromise<Element>, index: Int) {
    self.aggregate = aggregate
    self.index = index
    super.init(queue: nil)
  }

  override func willRegister(on source: _PromiseNode) {
    self.source = unsafeDowncast(source, to: Promise<Element>.self)
  }

  override var isLiveObserver: Bool { aggregate.isLiveObserver }

  override var downstream: Downstream { .node(aggregate) }

  override func fire() {
    let source = self.source.unsafelyUnwrapped
    self.source = nil
    if source.state.phase == .fulfilled {
      aggregate.receive(source.loadValue(), at: index)
    } else {
      aggregate.reject(source.state.error.unsafelyUnwrapped)
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
  /// - Parameters:
  ///   - promises: The promises to wait for.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of their values, in the order of `promises`.
  public static func all(
    _ promises: [Promise<Value>], file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<[Value]> {
    if promises.isEmpty { return Promise<[Value]>([], file: file, line: line) }
    let aggregate = AllPromise<Value>(count: promises.count, file: file, line: line)
    aggregate.upstream = TypedUpstreamGroup(promises)
    // The metatype is looked up once: in unspecialized code each `AllInputNode<Value>(…)`
    // would otherwise look its generic metadata up again, per input. The loop runs over a
    // buffer of the array: a generic `enumerated()` iterator looks metadata up per step.
    let node = AllInputNode<Value>.self
    promises.withUnsafeBufferPointer { inputs in
      for index in 0..<inputs.count {
        inputs[index].register(node.init(aggregate: aggregate, index: index))
      }
    }
    return aggregate
  }

  /// Returns a promise that settles when every input has, with every outcome in input order.
  ///
  /// Never rejected by an input's rejection: each `Result` says how that input ended.
  ///
  /// - Parameters:
  ///   - promises: The promises to wait for.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of their outcomes, in the order of `promises`.
  public static func allSettled(
    _ promises: [Promise<Value>], file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<[Result<Value, any Error>]> {
    let wrapped = promises.map { promise -> Promise<Result<Value, any Error>> in
      let (outcome, resolver) = Promise<Result<Value, any Error>>.pending(file: file, line: line)
      outcome.upstream = promise
      promise.register(ForwardingNode(owner: outcome) { result in resolver.fulfill(result) })
      return outcome
    }
    return Promise<Result<Value, any Error>>.all(wrapped, file: file, line: line)
  }

  /// Settles this promise with the outcome of `source` (inline forwarding, no dispatch).
  func follow(_ source: Promise<Value>) {
    source.register(ForwardingNode(owner: self) { [self] result in self.resolve(result) })
  }
}

extension Promise where Value == Void {
  /// Returns a promise of a tuple of the values of promises of different types.
  ///
  /// `Promise.all(user, settings, avatar)` gives a `Promise<(User, Settings, Avatar)>` once all
  /// three are fulfilled; the first rejection rejects it with that error.
  ///
  /// - Parameters:
  ///   - promises: The promises to wait for, of any types and any number.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of their values as a tuple, in argument order.
  public static func all<each Element: Sendable>(
    _ promises: repeat Promise<each Element>, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<(repeat each Element)> {
    tuple(of: repeat each promises, file: file, line: line)
  }

  /// Returns a promise of a tuple of the values of two promises of different types.
  ///
  /// The same as the variadic `all`, for two promises. Swift 6.3 fails on a step after the
  /// variadic form whose closure reads an element into a generic parameter — `Promise.all(a,
  /// b).done { pair in print(pair.0) }` gave "failed to produce diagnostic" — so two to six
  /// promises get overloads of fixed arity, which it ranks first.
  ///
  /// - Parameters:
  ///   - first: The first promise.
  ///   - second: The second promise.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of both values, in argument order.
  public static func all<A: Sendable, B: Sendable>(
    _ first: Promise<A>, _ second: Promise<B>, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<(A, B)> {
    tuple(of: first, second, file: file, line: line)
  }

  /// Returns a promise of a tuple of the values of three promises of different types.
  ///
  /// The same as the variadic `all`, for three promises (see `all(_:_:file:line:)`).
  ///
  /// - Parameters:
  ///   - first: The first promise.
  ///   - second: The second promise.
  ///   - third: The third promise.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the three values, in argument order.
  public static func all<A: Sendable, B: Sendable, C: Sendable>(
    _ first: Promise<A>, _ second: Promise<B>, _ third: Promise<C>, file: StaticString = #fileID,
    line: UInt = #line
  ) -> Promise<(A, B, C)> {
    tuple(of: first, second, third, file: file, line: line)
  }

  /// Returns a promise of a tuple of the values of four promises of different types.
  ///
  /// The same as the variadic `all`, for four promises (see `all(_:_:file:line:)`).
  ///
  /// - Parameters:
  ///   - first: The first promise.
  ///   - second: The second promise.
  ///   - third: The third promise.
  ///   - fourth: The fourth promise.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the four values, in argument order.
  public static func all<A: Sendable, B: Sendable, C: Sendable, D: Sendable>(
    _ first: Promise<A>, _ second: Promise<B>, _ third: Promise<C>, _ fourth: Promise<D>,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<(A, B, C, D)> {
    tuple(of: first, second, third, fourth, file: file, line: line)
  }

  /// Returns a promise of a tuple of the values of five promises of different types.
  ///
  /// The same as the variadic `all`, for five promises (see `all(_:_:file:line:)`).
  ///
  /// - Parameters:
  ///   - first: The first promise.
  ///   - second: The second promise.
  ///   - third: The third promise.
  ///   - fourth: The fourth promise.
  ///   - fifth: The fifth promise.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the five values, in argument order.
  public static func all<A: Sendable, B: Sendable, C: Sendable, D: Sendable, E: Sendable>(
    _ first: Promise<A>, _ second: Promise<B>, _ third: Promise<C>, _ fourth: Promise<D>,
    _ fifth: Promise<E>, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<(A, B, C, D, E)> {
    tuple(of: first, second, third, fourth, fifth, file: file, line: line)
  }

  /// Returns a promise of a tuple of the values of six promises of different types.
  ///
  /// The same as the variadic `all`, for six promises (see `all(_:_:file:line:)`).
  ///
  /// - Parameters:
  ///   - first: The first promise.
  ///   - second: The second promise.
  ///   - third: The third promise.
  ///   - fourth: The fourth promise.
  ///   - fifth: The fifth promise.
  ///   - sixth: The sixth promise.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the six values, in argument order.
  public static func all<A: Sendable, B: Sendable, C: Sendable, D: Sendable, E: Sendable, F: Sendable>(
    _ first: Promise<A>, _ second: Promise<B>, _ third: Promise<C>, _ fourth: Promise<D>,
    _ fifth: Promise<E>, _ sixth: Promise<F>, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<(A, B, C, D, E, F)> {
    tuple(of: first, second, third, fourth, fifth, sixth, file: file, line: line)
  }

  /// The tuple of every form of `all` for promises of different types.
  static func tuple<each Element: Sendable>(
    of promises: repeat Promise<each Element>, file: StaticString, line: UInt
  ) -> Promise<(repeat each Element)> {
    var erased: [Promise<Void>] = []
    for promise in repeat each promises {
      erased.append(completion(of: promise, file: file, line: line))
    }
    let (tuple, resolver) = Promise<(repeat each Element)>.pending(file: file, line: line)
    let gate = Promise<Void>.all(erased, file: file, line: line)
    tuple.upstream = gate
    gate.register(
      ForwardingNode<[Void]>(owner: tuple) { [resolver] result in
        switch result {
        case .failure(let error): resolver.reject(error)
        case .success:
          resolver.fulfill((repeat (each promises).settledValue))
        }
      })
    return tuple
  }

  /// A `Promise<Void>` settled inline when `promise` settles, its value dropped.
  ///
  /// - Parameters:
  ///   - promise: The promise to follow.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise settled when `promise` is, with its value dropped.
  static func completion<Input>(
    of promise: Promise<Input>, file: StaticString, line: UInt
  ) -> Promise<Void> {
    let (done, resolver) = Promise<Void>.pending(file: file, line: line)
    done.upstream = promise
    promise.register(
      ForwardingNode<Input>(owner: done) { result in resolver.resolve(result.map { _ in () }) })
    return done
  }
}
