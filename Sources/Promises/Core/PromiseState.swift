/// The state machine of one promise, as a plain value: pending with its callbacks, or settled.
///
/// `register`, `fulfill` and `reject` only compute what must happen; the promise that owns
/// the state calls them under its lock and carries out the returned action after unlocking,
/// so user code never runs under a lock. Callbacks are `_PromiseNode`s in a `NodeList`, in
/// registration order; settling hands the list back. The
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
    /// Schedule these callbacks, in registration order (an empty list when there are none);
    /// the caller now owns the list's references.
    case schedule(NodeList)
  }

  // Field order: the list and the error first, the one-byte phase last, so that the promise's
  // own one-byte fields, which follow the state, fill the rest of its last word (a link stays
  // at 104 bytes, inside glibc's 112-byte chunks).
  /// The callbacks waiting, in registration order, while pending; empty once settled.
  @usableFromInline private(set) var callbacks = NodeList()
  /// The rejection error, once rejected.
  @usableFromInline private(set) var error: (any Error)?
  @usableFromInline private(set) var phase: Phase

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
  var waitingCount: Int { callbacks.count }

  /// Whether a waiting callback still needs this promise (see `_PromiseNode.isLiveObserver`).
  ///
  /// A walk, made under the promise's lock by a cancellation from downstream only: the answer
  /// must hold until the rejection is stored, or a callback registered meanwhile would be
  /// cancelled with it. It stops at the first live node and reads only atomic flags
  /// (`settledFlag`, a forwarding node's retirement), never another promise's lock. Nothing
  /// cheaper was found that needs no field: a count of live callbacks cannot be kept, since
  /// callbacks stop being live (a cancelled link) without touching this promise.
  var hasLiveObserver: Bool { callbacks.contains { $0.isLiveObserver } }

  /// Stores `node` to run at settlement, or tells the caller to run it now.
  @usableFromInline @inline(__always)
  mutating func register(_ node: _PromiseNode) -> RegisterAction {
    guard phase == .pending else { return .runNow }
    callbacks.append(Unmanaged.passRetained(node))
    return .stored
  }

  /// Marks the state fulfilled (the owner stores the value); returns the callbacks to run.
  @inline(__always)
  mutating func fulfill() -> ResolveAction {
    guard phase == .pending else { return .ignored }
    phase = .fulfilled
    return .schedule(callbacks.takeAll())
  }

  /// Marks the state rejected with `error`; returns the callbacks to run.
  mutating func reject(_ error: any Error) -> ResolveAction {
    guard phase == .pending else { return .ignored }
    phase = .rejected
    self.error = error
    return .schedule(callbacks.takeAll())
  }

  /// Unlinks `node` from the list; the caller takes over the list's reference to it.
  ///
  /// - Returns: Whether `node` was in the list.
  mutating func remove(_ node: _PromiseNode) -> Bool {
    callbacks.remove(node)
  }

  /// Drops the references the list holds, for a state dropped while callbacks still wait.
  mutating func releaseCallbacks() {
    callbacks.releaseAll()
  }
}
