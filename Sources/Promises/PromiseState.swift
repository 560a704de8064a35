/// The state machine of one promise, as a plain value: pending with its callbacks, or settled.
///
/// `register` and `resolve` only compute what must happen; the promise that owns the state
/// calls them under its lock and carries out the returned action after unlocking, so user
/// code never runs under a lock. Callbacks are `_PromiseNode`s linked through `next`, newest
/// first while pending; `resolve` hands them back in registration order.
struct PromiseState<Value: Sendable> {
  /// Where the promise is in its life.
  enum Phase {
    /// Not settled; `head` is the most recently registered callback, or `nil`.
    case pending(head: _PromiseNode?)
    case fulfilled(Value)
    case rejected(any Error)
  }

  /// What the owner must do after `register`.
  enum RegisterAction: Equatable {
    /// The callback is stored and runs when the promise settles.
    case stored
    /// The promise has already settled: the owner dispatches the callback itself.
    case runNow
  }

  /// What the owner must do after `resolve`.
  enum ResolveAction {
    /// The promise had already settled; the new outcome is dropped (rule 1).
    case ignored
    /// Schedule these callbacks, in registration order (`nil` when there are none).
    case schedule(first: _PromiseNode?)
  }

  private(set) var phase: Phase = .pending(head: nil)

  init() {}

  init(settledWith result: Result<Value, any Error>) {
    switch result {
    case .success(let value): phase = .fulfilled(value)
    case .failure(let error): phase = .rejected(error)
    }
  }

  var isPending: Bool {
    if case .pending = phase { return true }
    return false
  }

  /// The outcome, or `nil` while pending.
  var result: Result<Value, any Error>? {
    switch phase {
    case .pending: return nil
    case .fulfilled(let value): return .success(value)
    case .rejected(let error): return .failure(error)
    }
  }

  /// The number of callbacks waiting (0 once settled).
  var waitingCount: Int {
    guard case .pending(var node) = phase else { return 0 }
    var count = 0
    while let current = node {
      count += 1
      node = current.next
    }
    return count
  }

  /// Stores `node` to run at settlement, or tells the caller to run it now.
  mutating func register(_ node: _PromiseNode) -> RegisterAction {
    guard case .pending(let head) = phase else { return .runNow }
    node.next = head
    phase = .pending(head: node)
    return .stored
  }

  /// Settles with `result` unless already settled; returns the callbacks to schedule.
  mutating func resolve(_ result: Result<Value, any Error>) -> ResolveAction {
    guard case .pending(let head) = phase else { return .ignored }
    switch result {
    case .success(let value): phase = .fulfilled(value)
    case .failure(let error): phase = .rejected(error)
    }
    // Reverse the newest-first list into registration order.
    var reversed: _PromiseNode?
    var node = head
    while let current = node {
      node = current.next
      current.next = reversed
      reversed = current
    }
    return .schedule(first: reversed)
  }
}
