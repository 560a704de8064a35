/// The state machine of one promise, as a plain value: pending with its callbacks, or settled.
///
/// `register`, `fulfill` and `reject` only compute what must happen; the promise that owns
/// the state calls them under its lock and carries out the returned action after unlocking,
/// so user code never runs under a lock. Callbacks are `_PromiseNode`s linked through
/// `link`, newest first while pending; settling hands them back in registration order. The
/// list owns one reference to each node (taken by `register`); `fulfill` and `reject` pass
/// those references on with the list, and the owner of a state that is dropped while
/// callbacks still wait must call `releaseCallbacks()`.
///
/// The state is deliberately not generic: the fulfilled value is stored by the promise
/// itself. Generic wrappers (`Result<Value, …>`, a generic enum) would make every access in
/// unspecialized code look up type metadata at run time, which measured as the largest cost
/// of a link.
@usableFromInline
struct PromiseState {
  /// Where the promise is in its life.
  @usableFromInline
  enum Phase: UInt8, Equatable, Sendable {
    case pending
    case fulfilled
    case rejected
  }

  /// What the owner must do after `register`.
  @usableFromInline
  enum RegisterAction: Equatable {
    /// The callback is stored and runs when the promise settles.
    case stored
    /// The promise has already settled: the owner dispatches the callback itself.
    case runNow
  }

  /// What the owner must do after `fulfill` or `reject`.
  @usableFromInline
  enum ResolveAction {
    /// The promise had already settled; the new outcome is dropped (a promise settles once:
    /// Docs/Design.md, "The state machine").
    case ignored
    /// Schedule these callbacks, in registration order (`nil` when there are none); the
    /// caller now owns the list's references.
    case schedule(first: Unmanaged<_PromiseNode>?)
  }

  @usableFromInline private(set) var phase: Phase
  /// The most recently registered callback while pending; `nil` once settled.
  @usableFromInline private(set) var first: Unmanaged<_PromiseNode>?

  /// The most recently registered callback, for inspection.
  var head: _PromiseNode? { first?.takeUnretainedValue() }
  /// The rejection error, once rejected.
  @usableFromInline private(set) var error: (any Error)?

  @usableFromInline
  init() {
    phase = .pending
  }

  /// A state that is already fulfilled.
  static var fulfilled: PromiseState {
    var state = PromiseState()
    state.phase = .fulfilled
    return state
  }

  /// A state that is already rejected with `error`.
  static func rejected(_ error: any Error) -> PromiseState {
    var state = PromiseState()
    state.phase = .rejected
    state.error = error
    return state
  }

  @usableFromInline
  var isPending: Bool { phase == .pending }

  /// The number of callbacks waiting (0 once settled).
  var waitingCount: Int {
    var count = 0
    var node = head
    while let current = node {
      count += 1
      node = current.next
    }
    return count
  }

  /// Whether a waiting callback still needs this promise (see `_PromiseNode.isLiveObserver`).
  var hasLiveObserver: Bool {
    var node = head
    while let current = node {
      if current.isLiveObserver { return true }
      node = current.next
    }
    return false
  }

  /// Stores `node` to run at settlement, or tells the caller to run it now.
  @usableFromInline @inline(__always)
  mutating func register(_ node: _PromiseNode) -> RegisterAction {
    guard phase == .pending else { return .runNow }
    node.link = first
    first = Unmanaged.passRetained(node)
    return .stored
  }

  /// Marks the state fulfilled (the owner stores the value); returns the callbacks to run.
  @inline(__always)
  mutating func fulfill() -> ResolveAction {
    guard phase == .pending else { return .ignored }
    phase = .fulfilled
    return .schedule(first: takeCallbacks())
  }

  /// Marks the state rejected with `error`; returns the callbacks to run.
  mutating func reject(_ error: any Error) -> ResolveAction {
    guard phase == .pending else { return .ignored }
    phase = .rejected
    self.error = error
    return .schedule(first: takeCallbacks())
  }

  /// Empties the list, reversing the newest-first links into registration order.
  @inline(__always)
  private mutating func takeCallbacks() -> Unmanaged<_PromiseNode>? {
    var reversed: Unmanaged<_PromiseNode>?
    var node = first
    first = nil
    while let current = node {
      current._withUnsafeGuaranteedRef { current in
        node = current.link
        current.link = reversed
      }
      reversed = current
    }
    return reversed
  }

  /// Unlinks `node` from the list; the caller takes over the list's reference to it.
  ///
  /// - Returns: Whether `node` was in the list.
  mutating func remove(_ node: _PromiseNode) -> Bool {
    guard let head = first else { return false }
    if head.toOpaque() == Unmanaged.passUnretained(node).toOpaque() {
      first = node.link
      node.link = nil
      return true
    }
    var previous = head.takeUnretainedValue()
    while let current = previous.link {
      if current.toOpaque() == Unmanaged.passUnretained(node).toOpaque() {
        previous.link = node.link
        node.link = nil
        return true
      }
      previous = current.takeUnretainedValue()
    }
    return false
  }

  /// Drops the references the list holds, for a state dropped while callbacks still wait.
  mutating func releaseCallbacks() {
    var node = first
    first = nil
    while let current = node {
      node = current._withUnsafeGuaranteedRef { current in
        defer { current.link = nil }
        return current.link
      }
      current.release()
    }
  }
}
