import Dispatch
import Synchronization

/// A value of type `Value` that will be available later, or the error that prevented it.
///
/// A promise settles once: it is fulfilled with a value or rejected with an error, and later
/// attempts to settle it are ignored. Chain work on it with `then`, `recover`, `catch` and
/// `always`; every callback runs asynchronously on a `DispatchQueue` (`DispatchQueue.promises`
/// unless you pass `on:`), never before the call that registered it has returned, and the
/// callbacks of one promise start in the order they were registered.
///
/// Make a promise with `Promise.pending()` (you keep the resolver and settle it later), with
/// `Promise { resolver in … }` (wraps callback-based work), with `Promise { try await … }`
/// (wraps async code), or already settled with `Promise(value)` or `Promise(error:)`.
///
/// A promise is `Sendable`: pass it between threads and tasks freely.
public class Promise<Value: Sendable>: _PromiseNode, @unchecked Sendable {
  // Safety of `@unchecked Sendable`: every stored `var` below is read and written only while
  // `lock` is held, with one exception: once the state has left `.pending`, `state.phase`,
  // `state.error` and `value` never change again, and nodes fired by the settlement read
  // them without the lock. The settling thread hands those nodes over through a lock release
  // or a `DispatchQueue.async`, which orders their reads after the writes. `file` and `line`
  // are constants.
  // Field order packs the one-byte fields together: a `then` link is one object of 104
  // bytes, inside glibc's fast allocation path (see `valueWords`).
  @usableFromInline let lock = SpinLock()
  @exclusivity(unchecked) var flags: PromiseFlags = []
  /// Whether a derived promise is in its second phase, adopting another promise's outcome.
  ///
  /// Only touched by the thread that fires the node (see `_PromiseNode`).
  @exclusivity(unchecked) final var isAdopting = false
  /// Mirrors "not pending" for lock-free reads by observers counting live callbacks (reading
  /// another promise's state under its lock while holding ours could deadlock).
  let settledFlag = Atomic<Bool>(false)
  let line: UInt32
  @usableFromInline @exclusivity(unchecked) var state: PromiseState
  /// The value once fulfilled, in place (two words) or, when larger, behind a pointer; until
  /// then, `upstream` and `extras`.
  ///
  /// Raw words rather than a `Value?`: in the unspecialized code a node runs, every access
  /// to an `Optional<Value>` looks its metadata up at run time; `Value`'s own metadata comes
  /// with the object. The value is initialized exactly when `state.phase == .fulfilled`.
  /// Before that the words hold two references that a fulfilled promise no longer needs, as
  /// retained bit patterns (0 for none): `.0` is `upstream`, `.1` is `extras`. Sharing the
  /// storage keeps a link at 104 bytes (glibc's 112-byte chunks) instead of 120: fewer cache
  /// lines per link cross between the building and the draining core, and a million-link
  /// chain needs 15 MiB less (Docs/Performance.md).
  @usableFromInline @exclusivity(unchecked) final var valueWords: (UInt, UInt) = (0, 0)
  /// The `#fileID` of the creation site (a static, NUL-terminated string).
  let fileStart: UnsafeRawPointer

  final class Extras {
    var cancelHandlers: [@Sendable () -> Void] = []
  }

  @usableFromInline
  init(queue: DispatchQueue?, file: StaticString, line: UInt, upstream: _PromiseNode? = nil) {
    self.state = PromiseState()
    if let upstream { self.valueWords.0 = Self.retainedBits(upstream) }
    self.fileStart = UnsafeRawPointer(file.utf8Start)
    self.line = UInt32(truncatingIfNeeded: line)
    super.init(queue: queue)
  }

  // MARK: References kept while not fulfilled

  @inline(__always)
  static func retainedBits(_ object: AnyObject) -> UInt {
    UInt(bitPattern: Unmanaged.passRetained(object).toOpaque())
  }

  @inline(__always)
  static func unmanaged<Object: AnyObject>(_ bits: UInt, as _: Object.Type) -> Unmanaged<Object> {
    Unmanaged<Object>.fromOpaque(UnsafeRawPointer(bitPattern: bits).unsafelyUnwrapped)
  }

  /// The promise this one waits on (its source or the promise it adopted), kept for
  /// cancellation and cycle detection and released at settlement; `nil` once fulfilled.
  ///
  /// Read and written under the lock, or by the thread that owns the promise exclusively
  /// (before it is returned, or the thread firing a claimed link). Setting it on a fulfilled
  /// promise does nothing.
  @usableFromInline
  final var upstream: _PromiseNode? {
    get { reference(valueWords.0, as: _PromiseNode.self) }
    set { replaceReference(&valueWords.0, with: newValue) }
  }

  /// Whether `upstream` is set, without retaining it.
  @inline(__always)
  final var hasUpstream: Bool { valueWords.0 != 0 && state.phase != .fulfilled }

  /// Rarely used parts (cancellation handlers), allocated on demand; `nil` once fulfilled.
  final var extras: Extras? {
    get { reference(valueWords.1, as: Extras.self) }
    set { replaceReference(&valueWords.1, with: newValue) }
  }

  /// The object a value word holds while the promise is not fulfilled.
  @inline(__always)
  private func reference<Object: AnyObject>(_ bits: UInt, as type: Object.Type) -> Object? {
    guard bits != 0, state.phase != .fulfilled else { return nil }
    return Self.unmanaged(bits, as: type).takeUnretainedValue()
  }

  /// Stores `object` in a value word, releasing what it held; does nothing once fulfilled.
  @inline(__always)
  private func replaceReference<Object: AnyObject>(_ bits: inout UInt, with object: Object?) {
    guard state.phase != .fulfilled else { return }
    let old = bits
    bits = object.map(Self.retainedBits) ?? 0
    // Never the last reference where it is set under the lock: every such caller read the
    // old value first and releases it after unlocking.
    if old != 0 { Self.unmanaged(old, as: Object.self).release() }
  }

  /// Moves `upstream` and `extras` out of the value's storage (the caller owns what it gets):
  /// called under the lock, before a fulfilment stores the value there.
  @inline(__always)
  final func takeReferencesBeforeFulfilling() -> (upstream: _PromiseNode?, extras: Extras?) {
    let (upstreamBits, extrasBits) = valueWords
    valueWords = (0, 0)
    let upstream =
      upstreamBits == 0 ? nil : Self.unmanaged(upstreamBits, as: _PromiseNode.self).takeRetainedValue()
    let extras = extrasBits == 0 ? nil : Self.unmanaged(extrasBits, as: Extras.self).takeRetainedValue()
    return (upstream, extras)
  }

  /// Creates a promise that is already fulfilled with `value`.
  ///
  /// Callbacks chained on it still run asynchronously, on their queue.
  ///
  /// - Parameters:
  ///   - value: The value.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  public init(_ value: Value, file: StaticString = #fileID, line: UInt = #line) {
    self.state = .fulfilled
    self.settledFlag.store(true, ordering: .relaxed)
    self.fileStart = UnsafeRawPointer(file.utf8Start)
    self.line = UInt32(truncatingIfNeeded: line)
    super.init(queue: nil)
    storeValue(value)
  }

  /// Creates a promise that is already rejected with `error`.
  ///
  /// - Parameters:
  ///   - error: The error.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  public init(error: any Error, file: StaticString = #fileID, line: UInt = #line) {
    self.state = .rejected(error)
    self.settledFlag.store(true, ordering: .relaxed)
    self.fileStart = UnsafeRawPointer(file.utf8Start)
    self.line = UInt32(truncatingIfNeeded: line)
    super.init(queue: nil)
  }

  /// Creates a pending promise and runs `body` at once, synchronously, with its resolver.
  ///
  /// Hand the resolver to callback-based work and settle it when the work completes. If
  /// `body` throws, the promise is rejected with that error. If every copy of the resolver is
  /// released before the promise settles, it is rejected with `PromiseError.brokenPromise`.
  /// What `body` settles is still observed asynchronously by chained callbacks.
  ///
  /// - Parameters:
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Starts the work; called once, before the initializer returns.
  public convenience init(
    file: StaticString = #fileID, line: UInt = #line, _ body: (Resolver) throws -> Void
  ) {
    self.init(queue: nil, file: file, line: line)
    let resolver = Resolver(ResolverToken(self))
    do {
      try body(resolver)
    } catch {
      resolver.reject(error)
    }
  }

  /// Returns a new pending promise and the resolver that settles it.
  ///
  /// Keep the resolver where the work completes; give the promise to whoever waits. When
  /// every copy of the resolver is released before it settles, the promise is rejected with
  /// `PromiseError.brokenPromise`, so waiters never hang.
  ///
  /// - Parameters:
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: The pending promise and the resolver that settles it.
  @inlinable
  public static func pending(
    file: StaticString = #fileID, line: UInt = #line
  ) -> (promise: Promise<Value>, resolver: Resolver) {
    let promise = Promise(queue: nil, file: file, line: line)
    return (promise, Resolver(ResolverToken(promise)))
  }

  deinit {
    // A pending promise goes only with its callbacks' chains (they hold it as `upstream`),
    // unless internal code dropped it; either way the list's references must go too.
    if state.first != nil { state.releaseCallbacks() }
    switch state.phase {
    case .fulfilled:
      if !(Self.storesValueInline && _isPOD(Value.self)) { destroyValue() }
    case .rejected:
      if valueWords != (0, 0) { releaseReferences() }
      if !flags.contains(.observed) { reportUnhandledRejection() }
    case .pending:
      if valueWords != (0, 0) { releaseReferences() }
    }
  }

  /// Drops `upstream` and `extras` of a promise that goes without being fulfilled.
  private func releaseReferences() {
    if valueWords.0 != 0 { Self.unmanaged(valueWords.0, as: _PromiseNode.self).release() }
    if valueWords.1 != 0 { Self.unmanaged(valueWords.1, as: Extras.self).release() }
    valueWords = (0, 0)
  }

  /// Reports a rejection nobody observed (cancellations excepted) to `UnhandledRejection`.
  ///
  /// Out of line: the type check it needs would otherwise cost every `deinit` a metadata
  /// look-up, rejected or not.
  @inline(never)
  private func reportUnhandledRejection() {
    guard let error = state.error, !(error is CancellationError) else { return }
    UnhandledRejection.report(error, site: CreationSite(fileStart, line))
  }

  // MARK: Reading the state

  /// The outcome: `nil` while pending, then `.success(value)` or `.failure(error)`.
  ///
  /// Reading a rejection counts as handling it (the unhandled-rejection hook is not called).
  public var result: Result<Value, any Error>? {
    lock.lock()
    defer { lock.unlock() }
    guard !state.isPending else { return nil }
    flags.insert(.observed)
    return settledResult
  }

  /// Whether the promise has not settled yet.
  public var isPending: Bool {
    lock.lock()
    defer { lock.unlock() }
    return state.isPending
  }

  /// Whether the promise was fulfilled with a value.
  public var isFulfilled: Bool {
    lock.lock()
    defer { lock.unlock() }
    return state.phase == .fulfilled
  }

  /// Whether the promise was rejected with an error (cancellation included).
  public var isRejected: Bool {
    lock.lock()
    defer { lock.unlock() }
    return state.phase == .rejected
  }

  /// Where this promise was created.
  public var creationSite: CreationSite { CreationSite(fileStart, line) }

  /// The outcome of a promise known to be settled, read without the lock (see the class's
  /// safety note): only for nodes fired by this promise's settlement, or under the lock.
  final var settledResult: Result<Value, any Error> {
    switch state.phase {
    case .fulfilled: return .success(loadValue())
    case .rejected: return .failure(state.error.unsafelyUnwrapped)
    case .pending: preconditionFailure("Promises: a callback fired before its promise settled")
    }
  }

  /// The value of a promise known to be fulfilled (see `settledResult`).
  final var settledValue: Value {
    guard state.phase == .fulfilled else {
      preconditionFailure("Promises: settledValue read from a promise that is not fulfilled")
    }
    return loadValue()
  }

  // MARK: Value storage

  @usableFromInline
  static var storesValueInline: Bool {
    MemoryLayout<Value>.size <= MemoryLayout<(UInt, UInt)>.size
      && MemoryLayout<Value>.alignment <= MemoryLayout<UInt>.alignment
  }

  /// Initializes the value storage; called once, before the fulfilled state is published.
  @inline(__always)
  final func storeValue(_ value: Value) {
    if Self.storesValueInline {
      // Pointer arguments rather than `withUnsafe…` closures: in the unspecialized code a
      // node runs, those closures are not inlined and cost a call and a context each.
      initializeValue(at: &valueWords, to: value)
    } else {
      let box = UnsafeMutablePointer<Value>.allocate(capacity: 1)
      box.initialize(to: value)
      valueWords.0 = UInt(bitPattern: box)
    }
  }

  /// A copy of the value; only once fulfilled.
  final func loadValue() -> Value {
    // From a copy of the words, not `&valueWords`: an inout access counts as a modification,
    // and concurrent readers of a settled promise would then race. The words are copied bit
    // for bit; `copyValue` makes the proper (retaining) copy of the value they hold.
    var words = valueWords
    if Self.storesValueInline {
      return copyValue(at: &words)
    }
    return UnsafePointer<Value>(bitPattern: words.0).unsafelyUnwrapped.pointee
  }

  private func destroyValue() {
    if Self.storesValueInline {
      // Trivial values (integers, plain structs) need no clean-up.
      if !_isPOD(Value.self) { destroyValue(at: &valueWords) }
    } else {
      let box = UnsafeMutablePointer<Value>(bitPattern: valueWords.0).unsafelyUnwrapped
      box.deinitialize(count: 1)
      box.deallocate()
    }
  }

  @inline(__always)
  private func initializeValue(at words: UnsafeMutableRawPointer, to value: Value) {
    words.initializeMemory(as: Value.self, to: value)
  }

  @inline(__always)
  private func copyValue(at words: UnsafeRawPointer) -> Value {
    words.assumingMemoryBound(to: Value.self).pointee
  }

  @inline(__always)
  private func destroyValue(at words: UnsafeMutableRawPointer) {
    words.assumingMemoryBound(to: Value.self).deinitialize(count: 1)
  }

  // MARK: The primitive

  /// Runs `node` when this promise settles: the single primitive under every combinator.
  ///
  /// Cost: one lock acquisition and no allocation (the node is linked in place). On a
  /// settled promise the node goes to its queue's outbox under the lock (never to a drain in
  /// progress, so it cannot overtake earlier callbacks of this promise), which costs a
  /// `queue.async` only when no block for that queue is on its way already.
  @usableFromInline
  final func register(_ node: _PromiseNode) {
    node.willRegister(on: self)
    registerLink(node)
  }

  /// `register` for a node that needs no `willRegister` call: a promise derived from this
  /// one, which already holds it as its `upstream`.
  @usableFromInline
  final func registerLink(_ node: _PromiseNode) {
    lock.lock()
    flags.insert(.observed)
    // Only a pending state is mutated: nodes of a settled promise read it without the lock,
    // and even a no-op mutating call counts as a write for ThreadSanitizer.
    let action: PromiseState.RegisterAction = state.isPending ? state.register(node) : .runNow
    guard action == .runNow else {
      lock.unlock()
      return
    }
    // The outbox (or run list) owns a reference to the node, as a promise's callback list
    // would. A queue node goes to its queue's outbox before unlocking: behind the callbacks
    // the settlement placed under this lock, ahead of any registered after it.
    if let queue = node.queue {
      node.link = nil
      Drain.post(Unmanaged.passRetained(node), on: queue)
      lock.unlock()
    } else {
      lock.unlock()
      node.link = nil
      Drain.schedule(Unmanaged.passRetained(node))
    }
  }

  /// Fulfils the promise with `value` unless it has settled; schedules its callbacks.
  @discardableResult
  final func settle(value: Value) -> Bool {
    fulfillTakingCallbacks(value).settled
  }

  /// Fulfils the promise with `value` unless it has settled, and schedules its callbacks.
  ///
  /// The callbacks are placed (`Drain.place`) before unlocking, so none registered later can
  /// overtake them; internal ones run after unlocking, before this returns. `first` is
  /// always `nil`: nothing is left for the caller to schedule.
  final func fulfillTakingCallbacks(_ value: Value) -> (settled: Bool, first: Drain.Node?) {
    lock.lock()
    guard state.isPending else {
      lock.unlock()
      return (false, nil)
    }
    // The value takes the place of these two references.
    let (upstream, extras) = takeReferencesBeforeFulfilling()
    storeValue(value)
    guard case .schedule(let first) = state.fulfill() else { preconditionFailure() }
    settledFlag.store(true, ordering: .releasing)
    guard let first else {
      lock.unlock()
      _ = (upstream, extras)
      return (true, nil)
    }
    let drain = Drain.current
    drain._withUnsafeGuaranteedRef { $0.place(first) }
    lock.unlock()
    // Released here, after unlocking: a deinit they trigger may run user code.
    _ = (upstream, extras)
    drain._withUnsafeGuaranteedRef { $0.forwardIfNeeded() }
    return (true, nil)
  }

  /// Rejects the promise with `error` unless it has settled; schedules its callbacks.
  @discardableResult
  final func settle(error: any Error) -> Bool {
    // Settling twice is common (a resolver released after fulfilling, a losing input): skip
    // the dynamic cast below when the promise has visibly settled already.
    if settledFlag.load(ordering: .acquiring) { return false }
    // Work that rejects itself with `CancellationError` is treated as cancelled.
    return settle(error: error, cancelling: error is CancellationError).settled
  }

  /// Settles the promise with `result` unless it has settled.
  @discardableResult
  final func settle(_ result: Result<Value, any Error>) -> Bool {
    switch result {
    case .success(let value): return settle(value: value)
    case .failure(let error): return settle(error: error)
    }
  }

  /// Rejects, releasing what the pending promise held; returns its upstream for cancellation.
  ///
  /// With `cancelling`, runs the cancellation handlers and releases the callback of a link
  /// that has not started yet (nothing a cancelled link captured stays alive while its source
  /// is pending: Docs/Design.md, "What a promise keeps, and when it lets go"). With `onlyIfUnobserved`, does nothing while a live observer still
  /// waits (a cancelled downstream promise cancels its upstream only if nobody else waits).
  ///
  /// `fromOutside` marks a cancellation (`cancel()`, `cancelFromDownstream()`), which any
  /// thread may make at any moment: once a link's body is claimed by the thread firing it, that
  /// thread owns the body and `upstream` (see `takeSourceIfPending`), and such a cancellation
  /// leaves both to it.
  final func settle(
    error: any Error, cancelling: Bool, onlyIfUnobserved: Bool = false, fromOutside: Bool = false
  ) -> (settled: Bool, upstream: _PromiseNode?) {
    lock.lock()
    guard state.isPending, !(onlyIfUnobserved && state.hasLiveObserver),
      case .schedule(let first) = state.reject(error)
    else {
      lock.unlock()
      return (false, nil)
    }
    settledFlag.store(true, ordering: .releasing)
    let claimed = fromOutside && flags.contains(.bodyClaimed)
    let upstream = claimed ? nil : self.upstream
    if !claimed { self.upstream = nil }
    let extras = self.extras
    // Written only when set: the write is an access to both value words, and a firing thread
    // that claimed this link reads `upstream`'s word without the lock (see `hasUpstream`).
    if extras != nil { self.extras = nil }
    let body = cancelling && !flags.contains(.bodyClaimed) ? detachBody() : nil
    // Placed before unlocking, like a fulfilment's (see `fulfillTakingCallbacks`).
    if let first { Drain.place(first) }
    lock.unlock()
    // Released after unlocking: a deinit they trigger may run user code.
    _ = body
    if cancelling, let extras {
      for handler in extras.cancelHandlers { handler() }
    }
    if first != nil { Drain.forwardIfNeeded() }
    return (true, upstream)
  }

  /// Takes the user's closure out of a link whose body has not run (called under the lock).
  func detachBody() -> Any? { nil }

  override final var isLiveObserver: Bool { !settledFlag.load(ordering: .acquiring) }

  /// Marks a new promise's rejection as handled (the promise `catch` returns).
  @usableFromInline
  final func markObserved() {
    lock.lock()
    flags.insert(.observed)
    lock.unlock()
  }

  /// For a node about to run: its source (the upstream that fired it), or `nil` when this
  /// promise has already settled (cancelled while it waited: the body must not run).
  final func takeSourceIfPending() -> Unmanaged<_PromiseNode>? {
    lock.lock()
    defer { lock.unlock() }
    guard state.isPending else { return nil }
    // From here on the firing thread owns the body and `upstream`: a cancellation neither
    // detaches the one nor releases the other, so the source needs no retain of its own.
    flags.insert(.bodyClaimed)
    return Self.unmanaged(valueWords.0, as: _PromiseNode.self)
  }

  final func setUpstream(_ node: _PromiseNode) {
    lock.lock()
    var replaced: _PromiseNode? = node
    if state.isPending { swap(&replaced, &upstream) }
    lock.unlock()
    // Released after unlocking: a deinit it triggers may run user code.
    withExtendedLifetime(replaced) {}
  }

  /// Removes `node` from the callbacks waiting on this promise, if it is still there.
  ///
  /// For a waiter that gives up (a timed-out `wait`): what it registered must not pile up in
  /// a promise that stays pending. Walks the list (newest first, so a node registered just
  /// before is found at once).
  /// - Returns: Whether the node was removed; `false` if the promise settled meanwhile and the
  ///   node has been (or is being) fired.
  @discardableResult
  final func unregister(_ node: _PromiseNode) -> Bool {
    lock.lock()
    let removed = state.isPending && state.remove(node)
    lock.unlock()
    // The list's reference, released after unlocking.
    if removed { Unmanaged.passUnretained(node).release() }
    return removed
  }

  override final var downstream: Downstream { .node(self) }

  override final func forEachWaitingCallback(_ body: (_PromiseNode) -> Void) {
    lock.lock()
    defer { lock.unlock() }
    guard state.isPending else { return }
    var node = state.head
    while let current = node {
      body(current)
      node = current.next
    }
  }

  /// This promise's pending state, queue and upstream, read together under its lock.
  override final func walkStep() -> (pending: Bool, queue: DispatchQueue?, upstream: _PromiseNode?) {
    lock.lock()
    defer { lock.unlock() }
    return (state.isPending, queue, upstream)
  }

  // MARK: Cancellation

  /// Cancels the promise: rejects it with `CancellationError` if it is still pending.
  ///
  /// Runs the cancellation handlers its work registered (`Resolver.onCancel`) on the calling
  /// thread, then cancels the work upstream — the promise this one was chained from or adopted,
  /// the inputs of `all`, `race` and `timeout` — when this promise was its only observer.
  /// Does nothing if the promise has already settled.
  public func cancel() {
    let (settled, upstream) = settle(error: CancellationError(), cancelling: true, fromOutside: true)
    guard settled else { return }
    Promise.propagateCancellation(from: upstream)
  }

  /// Walks upstream iteratively, so cancelling the tail of a long chain needs no deep stack.
  static func propagateCancellation(from upstream: _PromiseNode?) {
    var next = upstream
    while let node = next {
      next = node.cancelFromDownstream()
    }
  }

  override func cancelFromDownstream() -> _PromiseNode? {
    let (settled, upstream) = settle(
      error: CancellationError(), cancelling: true, onlyIfUnobserved: true, fromOutside: true)
    return settled ? upstream : nil
  }

  final func addCancelHandler(_ handler: @escaping @Sendable () -> Void) {
    lock.lock()
    if state.isPending {
      if extras == nil { extras = Extras() }
      extras!.cancelHandlers.append(handler)
      lock.unlock()
      return
    }
    let cancelled = state.error is CancellationError
    lock.unlock()
    if cancelled { handler() }
  }

  final var isCancelled: Bool {
    lock.lock()
    defer { lock.unlock() }
    return state.error is CancellationError
  }
}

extension Promise: CustomDebugStringConvertible {
  /// The state and creation site, for example `Promise<Int>(fulfilled: 42, created at App/Main.swift:3)`.
  public var debugDescription: String {
    lock.lock()
    let waiting = state.waitingCount
    let result = state.isPending ? nil : settledResult
    lock.unlock()
    let what: String
    switch result {
    case nil: what = "pending, \(waiting) callback\(waiting == 1 ? "" : "s") waiting"
    case .success(let value)?: what = "fulfilled: \(value)"
    case .failure(let error)?: what = "rejected: \(error)"
    }
    return "Promise<\(Value.self)>(\(what), created at \(creationSite))"
  }
}

// MARK: - Resolver

/// Bits of a promise's bookkeeping, guarded by its lock.
struct PromiseFlags: OptionSet {
  let rawValue: UInt8
  /// A callback was registered or the outcome was read: a rejection is not "unhandled".
  static let observed = PromiseFlags(rawValue: 1)
  /// A derived promise's body has started (or is about to): cancellation must not touch it.
  static let bodyClaimed = PromiseFlags(rawValue: 2)
}

/// Keeps a pending promise settleable; when the last resolver copy goes, the promise breaks.
@usableFromInline
final class ResolverToken<Value: Sendable>: Sendable {
  @usableFromInline let promise: Promise<Value>

  @usableFromInline
  init(_ promise: Promise<Value>) {
    self.promise = promise
  }

  deinit {
    // Most promises have settled by the time their last resolver goes: build the error (its
    // creation site is a `String`) only for one that is still pending.
    guard promise.isLiveObserver else { return }
    promise.settle(error: PromiseError.brokenPromise(createdAt: promise.creationSite))
  }
}

extension Promise {
  /// The write side of a pending promise: settles it once.
  ///
  /// A resolver is a small `Sendable` value; copy it into completion handlers freely. The
  /// first call to `fulfill`, `reject` or `resolve` settles the promise; later calls are
  /// ignored. When every copy has been released and the promise is still pending, it is
  /// rejected with `PromiseError.brokenPromise`.
  public struct Resolver: Sendable {
    @usableFromInline let token: ResolverToken<Value>

    @usableFromInline
    init(_ token: ResolverToken<Value>) {
      self.token = token
    }

    /// Fulfils the promise with `value` if it is still pending.
    public func fulfill(_ value: Value) {
      token.promise.settle(value: value)
    }

    /// Rejects the promise with `error` if it is still pending.
    public func reject(_ error: any Error) {
      token.promise.settle(error: error)
    }

    /// Settles the promise with `result` if it is still pending.
    public func resolve(_ result: Result<Value, any Error>) {
      token.promise.settle(result)
    }

    /// Registers work to run if the promise is cancelled before it settles.
    ///
    /// The handler runs once, on the thread that calls `cancel()`; if the promise was already
    /// cancelled it runs at once. It is released without running when the promise settles
    /// any other way.
    public func onCancel(_ handler: @escaping @Sendable () -> Void) {
      token.promise.addCancelHandler(handler)
    }

    /// Whether the promise has been cancelled: long-running work can poll this and stop early.
    public var isCancelled: Bool { token.promise.isCancelled }

    /// Whether the promise is still pending.
    public var isPending: Bool { token.promise.isPending }
  }
}

extension Promise.Resolver where Value == Void {
  /// Fulfils a `Promise<Void>`.
  public func fulfill() {
    fulfill(())
  }
}
