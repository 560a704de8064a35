import Dispatch
import Foundation

/// An input of a fan-out that has started: its promise and the node that waits on it.
struct RunningInput<Value: Sendable> {
  let promise: Promise<Value>
  let node: ForwardingNode<Value>

  /// Stops waiting and cancels the input's work, unless something else waits on it.
  func cancel() {
    node.retire()
    Promise<Value>.propagateCancellation(from: promise)
  }
}

/// The bookkeeping of a concurrency-limited fan-out, as a plain value.
///
/// Event methods say what the owner must do; the owner calls them under its lock and acts
/// after unlocking (starting work, settling the result, cancelling inputs). They never
/// allocate, and never release a value: storage that is done with is handed to the owner, to
/// release after unlocking (a value's deinit is user code).
struct FanOutState<Value: Sendable> {
  /// What to do after an input was fulfilled.
  enum Completion {
    /// Nothing: the fan-out has finished, or other inputs are still running.
    case none
    /// Start the input at this index.
    case start(Int)
    /// Every input is fulfilled: fulfil the result with these values (all non-`nil`), in
    /// input order.
    case fulfill([Value?])
  }

  /// What a finished fan-out hands over: the inputs still running, in input order (to
  /// cancel), and the storage to release after unlocking.
  struct Stop {
    let running: [RunningInput<Value>?]
    let values: [Value?]
  }

  private var values: [Value?]
  /// The running inputs, by index; one slot per input, allocated up front so that starting
  /// an input never allocates under the lock.
  private var running: [RunningInput<Value>?]
  private var nextIndex = 0
  private var remaining: Int
  private(set) var isFinished = false
  let limit: Int

  init(count: Int, limit: Int) {
    values = Array(repeating: nil, count: count)
    running = Array(repeating: nil, count: count)
    remaining = count
    self.limit = limit
  }

  /// The indices to start first: up to `limit` of them.
  mutating func startInitial() -> Range<Int> {
    let first = nextIndex..<min(values.count, limit)
    nextIndex = first.upperBound
    return first
  }

  /// Records that the input at `index` is running; returns `false` if the fan-out has
  /// finished meanwhile (the caller then cancels `input`).
  mutating func started(_ input: RunningInput<Value>, at index: Int) -> Bool {
    guard !isFinished else { return false }
    running[index] = input
    return true
  }

  /// Records the value of the input at `index`.
  mutating func fulfilled(_ value: Value, at index: Int) -> Completion {
    guard !isFinished else { return .none }
    values[index] = value
    running[index] = nil
    remaining -= 1
    if remaining == 0 {
      isFinished = true
      let collected = values
      values = []
      return .fulfill(collected)
    }
    guard nextIndex < values.count else { return .none }
    defer { nextIndex += 1 }
    return .start(nextIndex)
  }

  /// Finishes the fan-out after a rejection or a cancellation; returns the inputs still
  /// running and the values received, or `nil` if it had already finished.
  mutating func fail() -> Stop? {
    guard !isFinished else { return nil }
    isFinished = true
    defer {
      running = []
      values = []
    }
    return Stop(running: running, values: values)
  }
}

/// One run of `Promise.all(maxConcurrent:_:)`.
final class FanOut<Value: Sendable>: Sendable {
  /// Factories are called after unlocking, on `queue`; what the fan-out ends with is released
  /// after unlocking.
  private let state: LockedBox<State>
  private let queue: DispatchQueue

  private struct State: Sendable {
    var fanOut: FanOutState<Value>
    var factories: [(@Sendable () throws -> Promise<Value>)?]
    var resolver: Promise<[Value]>.Resolver?

    /// Takes the resolver and the factories out.
    mutating func takeResources() -> Resources {
      defer {
        resolver = nil
        factories = []
      }
      return Resources(resolver: resolver, factories: factories)
    }
  }

  /// The resolver and the factories left uncalled, taken out together when the fan-out ends.
  private struct Resources {
    let resolver: Promise<[Value]>.Resolver?
    /// Released by the caller after unlocking: what the closures capture may run user code
    /// in its deinit.
    let factories: [(@Sendable () throws -> Promise<Value>)?]
  }

  init(
    factories: [@Sendable () throws -> Promise<Value>], limit: Int,
    resolver: Promise<[Value]>.Resolver, queue: DispatchQueue
  ) {
    self.state = LockedBox(
      State(
        fanOut: FanOutState(count: factories.count, limit: limit), factories: factories,
        resolver: resolver))
    self.queue = queue
  }

  func startInitial() {
    let indices = state.withLock { $0.fanOut.startInitial() }
    for index in indices {
      queue.async { [self] in start(index) }
    }
  }

  /// Calls the factory at `index`; runs on `queue`.
  private func start(_ index: Int) {
    let factory: (@Sendable () throws -> Promise<Value>)? = state.withLock { state in
      guard !state.fanOut.isFinished else { return nil }
      defer { state.factories[index] = nil }
      return state.factories[index]
    }
    guard let factory else { return }
    let promise: Promise<Value>
    do {
      promise = try factory()
    } catch {
      fail(error)
      return
    }
    let node = ForwardingNode<Value> { [self] outcome in
      switch outcome {
      case .success(let value): fulfilled(value, at: index)
      case .failure(let error): fail(error)
      }
    }
    let input = RunningInput(promise: promise, node: node)
    guard state.withLock({ $0.fanOut.started(input, at: index) }) else {
      input.cancel()
      return
    }
    promise.register(node)
  }

  private func fulfilled(_ value: Value, at index: Int) {
    let (completion, resources): (FanOutState<Value>.Completion, Resources?) = state.withLock {
      state in
      let completion = state.fanOut.fulfilled(value, at: index)
      guard case .fulfill = completion else { return (completion, nil) }
      return (completion, state.takeResources())
    }
    switch completion {
    case .none: break
    case .start(let next): queue.async { [self] in start(next) }
    case .fulfill(let values): resources?.resolver?.fulfill(values.map { $0.unsafelyUnwrapped })
    }
  }

  /// Rejects the result with `error` and cancels the inputs still running.
  func fail(_ error: any Error) {
    guard let (stopped, resources) = stop() else { return }
    // Cancel first, so whoever observes the rejection also sees the work cancelled.
    for case let input? in stopped.running { input.cancel() }
    resources.resolver?.reject(error)
  }

  /// Stops after the result was cancelled: starts nothing more, cancels what is running.
  func cancel() {
    guard let (stopped, _) = stop() else { return }
    for case let input? in stopped.running { input.cancel() }
  }

  /// Finishes the state and takes the resources out, unless it had finished already.
  private func stop() -> (FanOutState<Value>.Stop, Resources)? {
    state.withLock { state in
      guard let stopped = state.fanOut.fail() else { return nil }
      return (stopped, state.takeResources())
    }
  }
}

extension Promise {
  /// Returns a promise of the values of the promises `factories` make, running at most
  /// `maxConcurrent` of them at a time.
  ///
  /// Factories are called on `queue`, asynchronously, in input order: the first
  /// `maxConcurrent` at once, then one more each time a running promise is fulfilled. The
  /// values keep input order, whatever order they arrive in. The first rejection (or throw)
  /// rejects the result with that error, no further factory is called, and the running
  /// promises are cancelled unless something else waits on them. Cancelling the result does
  /// the same. An empty array gives `[]`. `maxConcurrent` must be at least 1 (a precondition).
  ///
  /// - Parameters:
  ///   - queue: Where the factories are called; `DispatchQueue.promises` by default.
  ///   - maxConcurrent: The most promises pending at once; at least 1.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - factories: Each starts one piece of work and returns its promise.
  /// - Returns: A promise of all the values, in the order of `factories`.
  public static func all(
    on queue: DispatchQueue = .promises, maxConcurrent: Int,
    file: StaticString = #fileID, line: UInt = #line,
    _ factories: [@Sendable () throws -> Promise<Value>]
  ) -> Promise<[Value]> {
    precondition(
      maxConcurrent >= 1,
      "Promise.all(maxConcurrent:): maxConcurrent must be at least 1, got \(maxConcurrent)")
    if factories.isEmpty { return Promise<[Value]>([], file: file, line: line) }
    // The factories run on `queue`: `wait` on it for the result would deadlock.
    let (result, resolver) = Promise<[Value]>.pending(needing: queue, file: file, line: line)
    let fanOut = FanOut(factories: factories, limit: maxConcurrent, resolver: resolver, queue: queue)
    result.addCancelHandler { [weak fanOut] in fanOut?.cancel() }
    fanOut.startInitial()
    return result
  }

  /// Returns a promise of `transform` applied to every input, with at most `maxConcurrent`
  /// transforms pending at a time.
  ///
  /// `transform` is called on `queue`, asynchronously, in input order, as running promises
  /// are fulfilled; see `all(on:maxConcurrent:_:)` for ordering, rejection and cancellation.
  ///
  /// - Parameters:
  ///   - queue: Where `transform` is called; `DispatchQueue.promises` by default.
  ///   - inputs: The values to transform.
  ///   - maxConcurrent: The most promises pending at once; at least 1.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - transform: Starts the work for one input.
  /// - Returns: A promise of the results, in the order of `inputs`.
  public static func map<Input: Sendable>(
    on queue: DispatchQueue = .promises, _ inputs: [Input], maxConcurrent: Int,
    file: StaticString = #fileID, line: UInt = #line,
    _ transform: @escaping @Sendable (Input) throws -> Promise<Value>
  ) -> Promise<[Value]> {
    let factories = inputs.map { input -> @Sendable () throws -> Promise<Value> in
      { try transform(input) }
    }
    return all(on: queue, maxConcurrent: maxConcurrent, file: file, line: line, factories)
  }
}
