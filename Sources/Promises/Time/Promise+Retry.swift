import Dispatch
import Foundation

/// One run of `Promise.retry`: the attempts so far, the current wait, the result's resolver.
final class RetryOperation<Value: Sendable>: Sendable {
  /// What the retry holds while it runs; `nil` once it has stopped.
  ///
  /// User closures (`factory`, `shouldRetry`) are called after unlocking, on `queue`, and
  /// released after unlocking when the retry stops.
  private let state: LockedBox<Running?>
  private let maximumAttempts: Int
  private let delay: RetryDelay
  private let queue: DispatchQueue
  private let scheduler: any PromiseScheduler

  /// What a running retry holds.
  private struct Running: Sendable {
    let resolver: Promise<Value>.Resolver
    let factory: @Sendable () throws -> Promise<Value>
    let shouldRetry: @Sendable (any Error) -> Bool
    var generator: any RandomNumberGenerator & Sendable
    var attemptsMade = 0
    var timer: TimerSlot?
    /// The node waiting on the current attempt; retired when the retry stops.
    var attemptNode: ForwardingNode<Value>?

    /// Returns `delay`'s wait before the next attempt, drawing any jitter from `generator`.
    ///
    /// Called under the lock, so it runs the generator's `next()`, user code when the user
    /// supplies the generator, with the lock held: the draw must advance the state atomically.
    mutating func wait(before delay: RetryDelay) -> Duration {
      delay.duration(beforeRetry: attemptsMade, using: &generator)
    }
  }

  init(
    resolver: Promise<Value>.Resolver, attempts: Int, delay: RetryDelay,
    generator: any RandomNumberGenerator & Sendable, scheduler: any PromiseScheduler,
    queue: DispatchQueue, shouldRetry: @escaping @Sendable (any Error) -> Bool,
    factory: @escaping @Sendable () throws -> Promise<Value>
  ) {
    self.state = LockedBox(
      Running(resolver: resolver, factory: factory, shouldRetry: shouldRetry, generator: generator))
    self.maximumAttempts = attempts
    self.delay = delay
    self.scheduler = scheduler
    self.queue = queue
  }

  /// Starts the next attempt on `queue`; called on `queue`.
  func runAttempt() {
    let next: (Promise<Value>, @Sendable () throws -> Promise<Value>)? = state.withLock { running in
      running?.attemptsMade += 1
      running?.timer = nil
      return running.map { ($0.resolver.token.promise, $0.factory) }
    }
    guard let (result, factory) = next else { return }
    let attempt: Promise<Value>
    do {
      attempt = try factory()
    } catch {
      attemptFailed(error)
      return
    }
    let node = ForwardingNode<Value> { [self] outcome in
      switch outcome {
      case .success: finish(outcome)
      case .failure(let error): attemptFailed(error)
      }
    }
    // Run the node on `queue`, where `shouldRetry` must run.
    node.queue = queue
    let stillRunning = state.withLock { running in
      running?.attemptNode = node
      return running != nil
    }
    // Cancelling the result now cancels this attempt (when nothing else waits on it).
    if stillRunning { result.setUpstream(attempt) }
    if !stillRunning || !result.isPending {
      // Cancelled while the factory ran: the attempt's work is not wanted.
      node.retire()
      Promise<Value>.propagateCancellation(from: attempt)
      return
    }
    attempt.register(node)
  }

  /// Decides, on `queue`, whether to retry after `error`.
  private func attemptFailed(_ error: any Error) {
    let decider: (@Sendable (any Error) -> Bool)? = state.withLock { running in
      guard let running, running.attemptsMade < maximumAttempts else { return nil }
      return running.shouldRetry
    }
    guard let decider, decider(error) else {
      finish(.failure(error))
      return
    }
    let wait: Duration? = state.withLock { $0?.wait(before: delay) }
    guard let wait else { return }
    if wait <= .zero {
      queue.async { [self] in runAttempt() }
      return
    }
    let slot = TimerSlot()
    let stillRunning = state.withLock { running in
      running?.timer = slot
      return running != nil
    }
    guard stillRunning else { return }
    slot.start(after: wait, on: queue, scheduler: scheduler) { [self] in runAttempt() }
  }

  /// Settles the result and releases everything the retry held.
  func finish(_ outcome: Result<Value, any Error>) {
    stop()?.resolve(outcome)
  }

  /// Stops the retry after the result was cancelled: no more attempts, no pending wait, and
  /// the current attempt no longer observed (so that cancellation can reach it).
  func cancel() {
    _ = stop()
  }

  /// Ends the retry (once; `nil` afterwards): disarms the wait, retires the current attempt's
  /// node, releases the closures (after unlocking, before the result settles) and returns the
  /// result's resolver.
  private func stop() -> Promise<Value>.Resolver? {
    guard let stopped = state.exchange(nil) else { return nil }
    stopped.timer?.disarm()
    stopped.attemptNode?.retire()
    return stopped.resolver
  }
}

extension Promise {
  /// Returns a promise of the first successful attempt, calling `attempt` again after failures.
  ///
  /// `attempt` is called on `queue` — the first time asynchronously, after `retry` has
  /// returned — and again after each rejection (or throw) that `shouldRetry` accepts, waiting
  /// as `delay` says in between, until `attempts` calls have been made. The result is then
  /// rejected with the *last* error. `shouldRetry` also runs on `queue`; by default it retries
  /// every error except `CancellationError`. Cancelling the returned promise cancels the
  /// running attempt (when nothing else waits on it) and stops any further attempt and wait.
  ///
  /// - Parameters:
  ///   - queue: Where `attempt` and `shouldRetry` run; `DispatchQueue.promises` by default.
  ///   - attempts: The total number of calls to `attempt`, at least 1 (a precondition).
  ///   - delay: The wait before each retry; `.none` (retry at once) by default.
  ///   - generator: The randomness for `.full` jitter; pass a seeded generator in tests.
  ///     Each `retry` uses its own copy.
  ///   - scheduler: The clock for the waits; `PromiseSchedulers.default` unless you pass one.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - shouldRetry: Decides whether an error is worth another attempt.
  ///   - attempt: Starts one attempt; called once per attempt.
  /// - Returns: A promise of the first value an attempt produces.
  public static func retry(
    on queue: DispatchQueue = .promises, attempts: Int = 3, delay: RetryDelay = .none,
    using generator: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
    scheduler: any PromiseScheduler = PromiseSchedulers.default,
    file: StaticString = #fileID, line: UInt = #line,
    shouldRetry: @escaping @Sendable (any Error) -> Bool = { !($0 is CancellationError) },
    _ attempt: @escaping @Sendable () throws -> Promise<Value>
  ) -> Promise<Value> {
    precondition(attempts >= 1, "Promise.retry: attempts must be at least 1, got \(attempts)")
    // The attempts start on `queue`: `wait` on it for the result would deadlock.
    let (result, resolver) = Promise<Value>.pending(needing: queue, file: file, line: line)
    let operation = RetryOperation(
      resolver: resolver, attempts: attempts, delay: delay, generator: generator,
      scheduler: scheduler, queue: queue, shouldRetry: shouldRetry, factory: attempt)
    result.addCancelHandler { [weak operation] in operation?.cancel() }
    queue.async { operation.runAttempt() }
    return result
  }
}
