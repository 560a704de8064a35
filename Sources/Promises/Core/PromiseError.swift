/// Every error the `Promises` library raises, besides Swift's `CancellationError`.
///
/// Cases that concern one promise say where that promise was created, so a log line leads to
/// the code that made it. Match a case without its payload with `catch PromiseError.timedOut`
/// or `if case .brokenPromise = error`.
public enum PromiseError: Error, Sendable, CustomStringConvertible, Equatable {
  /// Nothing can settle the promise any more: its resolver was released while it was pending.
  case brokenPromise(createdAt: CreationSite)
  /// The time allowed ran out before the promise settled (`wait(timeout:)`, `timeout(_:)`).
  case timedOut(after: Duration, createdAt: CreationSite)
  /// A `validate` predicate returned `false` for the value.
  case validationFailed(createdAt: CreationSite)
  /// A `compactMap` transform returned `nil` for the value.
  case compactMapReturnedNil(createdAt: CreationSite)
  /// A promise was made to adopt itself, directly or through a cycle of promises.
  case chainingCycle(createdAt: CreationSite)
  /// `wait(timeout:)` was called on a queue that the promise needs in order to settle.
  case waitWouldDeadlock(queue: String, createdAt: CreationSite)
  /// Every input of `Promise.any` was rejected; the errors are in input order.
  case allRejected([any Error])
  /// Signals that `Promise.race` was given no promises, so nothing could ever settle its result.
  case emptyRace(createdAt: CreationSite)
  /// Signals that a completion handler was called with neither a value nor an error
  /// (`Promise.wrap`, `Resolver.resolve(_:_:)`); `reason` says what was wrong.
  case invalidCallback(reason: String, createdAt: CreationSite)

  /// `VirtualTimeScheduler.advance(until:)` gave up on the promise created at the site: no
  /// timer was pending and nothing scheduled one in time, or it took more steps than allowed.
  ///
  /// `pendingTimers` describes the work still scheduled (its virtual deadline and queue), to
  /// show which timer the test did not expect or which it is missing.
  case virtualTimeStalled(reason: String, pendingTimers: [String], createdAt: CreationSite)

  /// A sentence that names the problem and where the promise came from.
  public var description: String {
    switch self {
    case .brokenPromise(let site):
      return "broken promise: the promise created at \(site) can never settle (its resolver was released)"
    case .timedOut(let duration, let site):
      return "timed out after \(duration) waiting for the promise created at \(site)"
    case .validationFailed(let site):
      return "validation failed for the promise created at \(site)"
    case .compactMapReturnedNil(let site):
      return "compactMap returned nil for the promise created at \(site)"
    case .chainingCycle(let site):
      return "chaining cycle: the promise created at \(site) would wait on itself"
    case .waitWouldDeadlock(let queue, let site):
      return
        "wait(timeout:) on queue '\(queue)' would deadlock: the promise created at \(site) needs that queue to settle"
    case .allRejected(let errors):
      return "all \(errors.count) promises were rejected: \(errors.map { "\($0)" }.joined(separator: "; "))"
    case .emptyRace(let site):
      return "race of no promises: the promise created at \(site) has nothing to wait for"
    case .invalidCallback(let reason, let site):
      return "invalid callback for the promise created at \(site): \(reason)"
    case .virtualTimeStalled(let reason, let timers, let site):
      let pending = timers.isEmpty ? "no timer is pending" : "pending: \(timers.joined(separator: ", "))"
      return "virtual time stalled: the promise created at \(site) is still pending (\(reason)); \(pending)"
    }
  }

  /// Compares kind and payload; errors inside `allRejected` are compared by their descriptions.
  public static func == (lhs: PromiseError, rhs: PromiseError) -> Bool {
    switch (lhs, rhs) {
    case (.brokenPromise(let a), .brokenPromise(let b)): return a == b
    case (.timedOut(let a, let c), .timedOut(let b, let d)): return a == b && c == d
    case (.validationFailed(let a), .validationFailed(let b)): return a == b
    case (.compactMapReturnedNil(let a), .compactMapReturnedNil(let b)): return a == b
    case (.chainingCycle(let a), .chainingCycle(let b)): return a == b
    case (.waitWouldDeadlock(let a, let c), .waitWouldDeadlock(let b, let d)): return a == b && c == d
    case (.allRejected(let a), .allRejected(let b)):
      return a.map { String(reflecting: $0) } == b.map { String(reflecting: $0) }
    case (.emptyRace(let a), .emptyRace(let b)): return a == b
    case (.invalidCallback(let a, let c), .invalidCallback(let b, let d)): return a == b && c == d
    case (.virtualTimeStalled(let a, let c, let e), .virtualTimeStalled(let b, let d, let f)):
      return a == b && c == d && e == f
    default: return false
    }
  }
}
