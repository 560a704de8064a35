import Dispatch
import Foundation

/// One run of `Promise.retry`: the attempts so far, the current wait, the result's resolver.
final class RetryOperation<Value: Sendable>: @unchecked Sendable {
  // Safety: every `var` is only accessed while `lock` is held; the constants are immutable.
  // User closures (`factory`, `shouldRetry`) are called after unlocking, on `queue`.
  private let lock = NSLock()
  private var resolver: Promise<Value>.Resolver?
  private var factory: (@Sendable () throws -> Promise<Value>)?
  private var shouldRetry: (@Sendable (any Error) -> Bool)?
  private var generator: any RandomNumberGenerator & Sendable
  private var attemptsMade = 0
  private var timer: TimerSlot?
  /// The node waiting on the current attempt; retired when the retry stops.
  private var attemptNode: ForwardingNode<Value>?
  private let maximumAttempts: Int
  private let delay: RetryDelay
  private let queue: DispatchQueue
  private let scheduler: any PromiseScheduler

  init(
    resolver: Promise<Value>.Resolver, attempts: Int, delay: RetryDelay,
    generator: any RandomNumberGenerator & Sendable, scheduler: any PromiseScheduler,
    queue: DispatchQueue, shouldRetry: @escaping @Sendable (any Error) -> Bool,
    factory: @escaping @Sendable () throws -> Promise<Value>
  ) {
    self.resolver = resolver
    self.maximumAttempts = attempts
    self.delay = delay
    self.generator = generator
    self.scheduler = scheduler
    self.queue = queue
    self.shouldRetry = shouldRetry
    self.factory = factory
  }

  /// Starts the next attempt on `queue`; called on `queue`.
  func runAttempt() {
    let next: (Promise<Value>, @Sendable () throws -> Promise<Value>)? = lock.withLock {
      guard let resolver, let factory else { return nil }
      attemptsMade += 1
      timer = nil
      return (resolver.token.promise, factory)
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
    let stillRunning = lock.withLock {
      guard resolver != nil else { return false }
      attemptNode = node
      return true
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
    let decider: (@Sendable (any Error) -> Bool)? = lock.withLock {
      guard resolver != nil, attemptsMade < maximumAttempts else { return nil }
      return shouldRetry
    }
    guard let decider, decider(error) else {
      finish(.failure(error))
      return
    }
    let wait: Duration? = lock.withLock {
      guard resolver != nil else { return nil }
      return delay.duration(beforeRetry: attemptsMade, using: &generator)
    }
    guard let wait else { return }
    if wait <= .zero {
      queue.async { [self] in runAttempt() }
      return
    }
    let slot = TimerSlot()
    let stillRunning = lock.withLock {
      guard resolver != nil else { return false }
      timer = slot
      return true
    }
    guard stillRunning else { return }
    slot.start(after: wait, on: queue, scheduler: scheduler) { [self] in runAttempt() }
  }

  /// Settles the result and releases everything the retry held.
  func finish(_ outcome: Result<Value, any Error>) {
    let (resolver, timer, node) = takeAll()
    timer?.disarm()
    node?.retire()
    resolver?.resolve(outcome)
  }

  /// Stops the retry after the result was cancelled: no more attempts, no pending wait, and
  /// the current attempt no longer observed (so that cancellation can reach it).
  func cancel() {
    let (_, timer, node) = takeAll()
    timer?.disarm()
    node?.retire()
  }

  private func takeAll() -> (Promise<Value>.Resolver?, TimerSlot?, ForwardingNode<Value>?) {
    lock.withLock {
      defer {
        resolver = nil
        factory = nil
        shouldRetry = nil
        timer = nil
        attemptNode = nil
      }
      return (resolver, timer, attemptNode)
    }
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
