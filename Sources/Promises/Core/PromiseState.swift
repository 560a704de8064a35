/// The state machine of one promise, as a value: pending with its callbacks, or settled.
///
/// `register`, `fulfill` and `reject` only compute what must happen; the promise that owns
/// the state calls them under its lock and carries out the returned action after unlocking,
/// so user code never runs under a lock. Callbacks are `_PromiseNode`s linked through their
/// `link` in registration order, kept as a ring while pending; settling hands them back as a
/// `NodeList`. The state owns one reference to each node (taken by `register`); `fulfill` and
/// `reject` pass those references on with the list, and the owner of a state that is dropped
/// while callbacks still wait must call `releaseCallbacks()`. The state owns its rejection
/// error, which is why it is non-copyable: its `deinit` releases the error.
///
/// The state is deliberately not generic: the fulfilled value is stored by the promise
/// itself. Generic wrappers (`Result<Value, …>`, a generic enum) would make every access in
/// unspecialized code look up type metadata at run time, which measured as the largest cost
/// of a link.
@usableFromInline
struct PromiseState: ~Copyable {
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

  // One word and the phase: the promise's own one-byte fields and its line, which follow the
  // state, fill the rest of the phase's word, so that a `then` link is one object of 88 bytes,
  // inside glibc's 96-byte chunks (`LinkSizeTests`). The callbacks and the error share the
  // word because a promise needs them at different times: the list only while pending (settling
  // hands it back), the error only once rejected.
  /// The callbacks while pending, the error once rejected.
  ///
  /// While pending: the newest waiting callback, whose `link` points at the oldest (a ring:
  /// one word reaches both ends), or 0 when none waits. Once rejected: the error, an `any Error`
  /// the state owns. Once fulfilled: 0.
  @usableFromInline private(set) var word: UInt = 0
  @usableFromInline private(set) var phase: Phase

  @usableFromInline
  init() {
    phase = .pending
  }

  @inlinable deinit {
    // The list's references are its owner's to release (`releaseCallbacks`); the error is ours.
    // (`deinit` cannot write the word: the error is destroyed through a copy of its bits.)
    if phase == .rejected {
      var bits = word
      Self.destroyError(at: &bits)
    }
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
    Self.initializeError(at: &state.word, to: error)
    return state
  }

  /// The rejection error, once rejected; `nil` otherwise.
  ///
  /// A settled state's word no longer changes: nodes its settlement fired read it without
  /// the promise's lock (Docs/Design.md, "Invariants", I2).
  @usableFromInline
  var error: (any Error)? {
    guard phase == .rejected else { return nil }
    return Self.loadError(at: word)
  }

  // `any Error` is one pointer to a boxed error on every platform Swift supports; the state
  // keeps it in its word as that pointer, owning one reference.
  @inline(__always)
  private static func initializeError(at word: UnsafeMutablePointer<UInt>, to error: any Error) {
    UnsafeMutableRawPointer(word).initializeMemory(as: (any Error).self, to: error)
  }

  @inline(__always)
  private static func loadError(at word: UInt) -> any Error {
    var copy = word
    return withUnsafePointer(to: &copy) { UnsafeRawPointer($0).load(as: (any Error).self) }
  }

  @usableFromInline @inline(__always)
  static func destroyError(at word: UnsafeMutablePointer<UInt>) {
    UnsafeMutableRawPointer(word).assumingMemoryBound(to: (any Error).self).deinitialize(count: 1)
  }

  // MARK: The callbacks, a ring while pending

  /// The newest waiting callback, while pending; its `link` is the oldest.
  @inline(__always)
  private var newest: NodeList.Node? {
    guard phase == .pending, let pointer = UnsafeRawPointer(bitPattern: word) else { return nil }
    return NodeList.Node.fromOpaque(pointer)
  }

  @inline(__always)
  private static func bits(_ node: NodeList.Node) -> UInt {
    UInt(bitPattern: node.toOpaque())
  }

  /// Whether any callback waits.
  var hasCallbacks: Bool { newest != nil }

  /// Calls `body` with each waiting callback, oldest first, without changing the list.
  func forEachCallback(_ body: (_PromiseNode) -> Void) {
    _ = firstCallback {
      body($0); return false
    }
  }

  /// The oldest waiting callback for which `predicate` holds, visited oldest first.
  @discardableResult
  private func firstCallback(where predicate: (_PromiseNode) -> Bool) -> NodeList.Node? {
    guard let newest else { return nil }
    var current = newest._withUnsafeGuaranteedRef { $0.link.unsafelyUnwrapped }
    while true {
      let (found, next) = current._withUnsafeGuaranteedRef { (predicate($0), $0.link) }
      if found { return current }
      if current.toOpaque() == newest.toOpaque() { return nil }
      current = next.unsafelyUnwrapped
    }
  }

  /// The oldest and the newest waiting callback (for tests).
  var callbackEnds: (oldest: _PromiseNode?, newest: _PromiseNode?) {
    guard let newest else { return (nil, nil) }
    let oldest = newest._withUnsafeGuaranteedRef { $0.link.unsafelyUnwrapped }
    return (oldest.takeUnretainedValue(), newest.takeUnretainedValue())
  }

  /// Hands the ring back as a list, oldest first, and leaves the word 0.
  @inline(__always)
  private mutating func takeCallbacks() -> NodeList {
    guard let newest else { return NodeList() }
    word = 0
    let oldest = newest._withUnsafeGuaranteedRef { node in
      defer { node.link = nil }
      return node.link.unsafelyUnwrapped
    }
    return NodeList(oldest: oldest, newest: newest)
  }

  @usableFromInline
  var isPending: Bool { phase == .pending }

  /// The number of callbacks waiting (0 once settled).
  var waitingCount: Int {
    var count = 0
    forEachCallback { _ in count += 1 }
    return count
  }

  /// Whether a waiting callback still needs this promise (see `_PromiseNode.isLiveObserver`).
  ///
  /// A walk, made under the promise's lock by a cancellation from downstream only: the answer
  /// must hold until the rejection is stored, or a callback registered meanwhile would be
  /// cancelled with it. It stops at the first live node and reads only atomic flags
  /// (`settledFlag`, a forwarding node's retirement), never another promise's lock. Nothing
  /// cheaper was found that needs no field: a count of live callbacks cannot be kept, since
  /// callbacks stop being live (a cancelled link) without touching this promise.
  var hasLiveObserver: Bool { firstCallback { $0.isLiveObserver } != nil }

  /// Stores `node` to run at settlement, or tells the caller to run it now.
  @usableFromInline @inline(__always)
  mutating func register(_ node: _PromiseNode) -> RegisterAction {
    guard phase == .pending else { return .runNow }
    // A node in no list has a `nil` link (see `NodeList`): nothing to clear.
    assert(node.link == nil, "Promises: a node joined two lists")
    let added = Unmanaged.passRetained(node)
    if let newest {
      // The new node goes between the newest and the oldest, and becomes the newest.
      node.link = newest._withUnsafeGuaranteedRef { $0.link }
      newest._withUnsafeGuaranteedRef { $0.link = added }
    } else {
      node.link = added
    }
    word = Self.bits(added)
    return .stored
  }

  /// Marks the state fulfilled (the owner stores the value); returns the callbacks to run.
  @inline(__always)
  mutating func fulfill() -> ResolveAction {
    guard phase == .pending else { return .ignored }
    let callbacks = takeCallbacks()
    phase = .fulfilled
    return .schedule(callbacks)
  }

  /// Marks the state rejected with `error`; returns the callbacks to run.
  mutating func reject(_ error: any Error) -> ResolveAction {
    guard phase == .pending else { return .ignored }
    let callbacks = takeCallbacks()
    phase = .rejected
    Self.initializeError(at: &word, to: error)
    return .schedule(callbacks)
  }

  /// Unlinks `node` from the list; the caller takes over the list's reference to it.
  ///
  /// - Returns: Whether `node` was in the list.
  mutating func remove(_ node: _PromiseNode) -> Bool {
    guard let newest else { return false }
    let target = Unmanaged.passUnretained(node).toOpaque()
    var previous = newest
    while true {
      let current = previous._withUnsafeGuaranteedRef { $0.link.unsafelyUnwrapped }
      if current.toOpaque() == target {
        if current.toOpaque() == previous.toOpaque() {
          word = 0  // the only node
        } else {
          previous._withUnsafeGuaranteedRef { $0.link = node.link }
          if current.toOpaque() == newest.toOpaque() { word = Self.bits(previous) }
        }
        node.link = nil
        return true
      }
      if current.toOpaque() == newest.toOpaque() { return false }
      previous = current
    }
  }

  /// Drops the references the list holds, for a state dropped while callbacks still wait.
  mutating func releaseCallbacks() {
    var callbacks = takeCallbacks()
    callbacks.releaseAll()
  }
}
