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
  // `lock` is held, with the exceptions that Docs/Design.md, "Invariants", lists and proves
  // (I2: a settled promise's `state` and value are immutable and read without the lock by
  // the nodes its settlement fired; I3: the thread firing a link that it found not settled
  // owns its body and `upstream`). `file` and `line` are constants.
  // Field order: the state (one word, then its one-byte phase) first, then the one-byte fields
  // and the line fill the phase's word, so that a `then` link is one object of 88 bytes,
  // inside glibc's 96-byte chunks (a test checks it: `LinkSizeTests`).
  @usableFromInline @exclusivity(unchecked) var state: PromiseState
  @usableFromInline let lock = SpinLock()
  @exclusivity(unchecked) var flags: PromiseFlags = []
  /// Mirrors "not pending", for reads without the lock.
  ///
  /// Read by observers counting live callbacks (reading another promise's state under its lock
  /// while holding ours could deadlock) and by `registerLink` on a fulfilled promise. Set
  /// (releasing) only after the settlement has placed its callbacks, so whoever reads it set
  /// queues behind them.
  let settledFlag = Atomic<Bool>(false)
  let line: UInt32
  /// The value once fulfilled; until then, `upstream` and `extras` (see `ValueStorage`).
  @usableFromInline @exclusivity(unchecked) final var storage = ValueStorage()
  /// The `#fileID` of the creation site (a static, NUL-terminated string).
  let fileStart: UnsafeRawPointer

  @usableFromInline
  init(queue: DispatchQueue?, file: StaticString, line: UInt, upstream: _PromiseNode? = nil) {
    self.state = PromiseState()
    self.fileStart = UnsafeRawPointer(file.utf8Start)
    self.line = UInt32(truncatingIfNeeded: line)
    if let upstream { storage.setUpstream(upstream) }
    super.init(queue: queue)
  }

  // MARK: References kept while not fulfilled

  /// The promise this one waits on (its source or the promise it adopted), kept for
  /// cancellation and cycle detection and released at settlement; `nil` once fulfilled.
  ///
  /// Read and written under the lock, or by the thread that owns the promise exclusively
  /// (before it is returned, or the thread firing a link it found not settled). Setting it on
  /// a fulfilled promise does nothing.
  @usableFromInline
  final var upstream: _PromiseNode? {
    get { state.phase == .fulfilled ? nil : storage.upstream }
    set { if state.phase != .fulfilled { storage.setUpstream(newValue) } }
  }

  /// Whether `upstream` is set, without retaining it.
  @inline(__always)
  final var hasUpstream: Bool {
    // The word itself, not a copy of the storage: a firing thread reads this without the lock
    // while a cancellation may write the other word under it.
    storage.words.0 != 0 && state.phase != .fulfilled
  }

  /// Rarely used parts (cancellation handlers), allocated on demand; `nil` once fulfilled.
  final var extras: PromiseExtras? {
    get { state.phase == .fulfilled ? nil : storage.extras }
    set { if state.phase != .fulfilled { storage.setExtras(newValue) } }
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
    storage.initialize(to: value)
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
  ///
  /// The closure is labeled and is written as a trailing closure: `Promise<Int> { resolver in
  /// … }`. Unlabeled, it made every `Promise(literal)` an overload search (Swift tried the
  /// literal as the closure too), and `Promise(8).map { … }` with a ternary failed to
  /// type-check (see Docs/Design.md, "One verb per closure shape").
  public convenience init(
    file: StaticString = #fileID, line: UInt = #line, resolving body: (Resolver) throws -> Void
  ) {
    self.init(queue: nil, file: file, line: line)
    let resolver = Resolver(ResolverToken(self))
    do {
      try body(resolver)
    } catch {
      resolver.reject(error)
    }
  }

  /// Use `init(resolving:)`: the closure is labeled, or written as a trailing closure.
  @available(*, unavailable, renamed: "init(file:line:resolving:)")
  public convenience init(file: StaticString = #fileID, line: UInt = #line, _ body: (Resolver) throws -> Void)
  {
    fatalError("unavailable")
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

  /// `pending()` for a combinator whose own work runs on `queue` (a timer, the next attempt,
  /// the next factory), waiting on `upstream` if given.
  ///
  /// The promise reports `queue` to walks up the chain (`walkStep`), as a `then(on: queue)`
  /// link does: `wait(timeout:)` called on `queue` then throws `waitWouldDeadlock` instead of
  /// blocking the queue the combinator needs. Such a promise is never registered as a callback,
  /// so its queue means nothing else.
  static func pending(
    needing queue: DispatchQueue, upstream: _PromiseNode? = nil, file: StaticString, line: UInt
  ) -> (promise: Promise<Value>, resolver: Resolver) {
    let promise = Promise(queue: queue, file: file, line: line, upstream: upstream)
    return (promise, Resolver(ResolverToken(promise)))
  }

  deinit {
    // A pending promise goes only with its callbacks' chains (they hold it as `upstream`),
    // unless internal code dropped it; either way the list's references must go too.
    if state.hasCallbacks { state.releaseCallbacks() }
    switch state.phase {
    case .fulfilled:
      storage.destroy(as: Value.self)
    case .rejected:
      if storage.isOccupied { storage.releaseReferences() }
      if !flags.contains(.observed) { reportUnhandledRejection() }
    case .pending:
      if storage.isOccupied { storage.releaseReferences() }
    }
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
    case .fulfilled: return .success(storage.load(as: Value.self))
    case .rejected: return .failure(state.error.unsafelyUnwrapped)
    case .pending: preconditionFailure("Promises: a callback fired before its promise settled")
    }
  }

  /// The value of a promise known to be fulfilled (see `settledResult`).
  final var settledValue: Value {
    guard state.phase == .fulfilled else {
      preconditionFailure("Promises: settledValue read from a promise that is not fulfilled")
    }
    return storage.load(as: Value.self)
  }

  /// A copy of the value; only once fulfilled (see `settledResult`).
  @inline(__always)
  final func loadValue() -> Value { storage.load(as: Value.self) }

  // MARK: The primitive

  /// Runs `node` when this promise settles: the single primitive under every combinator.
  ///
  /// Cost: one lock acquisition (none on a fulfilled promise) and no allocation (the node is
  /// linked in place). On a settled promise the node goes to its queue's outbox (never to a
  /// drain in progress, so it cannot overtake earlier callbacks of this promise), which costs
  /// a `queue.async` only when no block for that queue is on its way already.
  @usableFromInline
  final func register(_ node: _PromiseNode) {
    node.willRegister(on: self)
    registerLink(node)
  }

  /// `register` for a node that needs no `willRegister` call: a promise derived from this
  /// one, which already holds it as its `upstream`.
  @usableFromInline
  final func registerLink(_ node: _PromiseNode) {
    // A fulfilled promise is immutable (Docs/Design.md, "Invariants", I2) and its settlement
    // placed its callbacks before setting `settledFlag`: a queue node registered on it needs
    // neither its lock nor its flags (`observed` matters only for a rejection), and goes to
    // the outbox behind those callbacks (I4). Registering then writes nothing to the source,
    // whose cache line the threads running earlier callbacks are reading.
    if settledFlag.load(ordering: .acquiring), state.phase == .fulfilled, let queue = node.queue {
      let drain = Drain.current
      drain._withUnsafeGuaranteedRef {
        $0.post(Unmanaged.passRetained(node), on: queue)
        $0.finishPlacing()
      }
      return
    }
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
    let drain = Drain.current
    if let queue = node.queue {
      drain._withUnsafeGuaranteedRef { $0.post(Unmanaged.passRetained(node), on: queue) }
      lock.unlock()
      drain._withUnsafeGuaranteedRef { $0.finishPlacing() }
    } else {
      lock.unlock()
      drain._withUnsafeGuaranteedRef { $0.runInternal(Unmanaged.passRetained(node)) }
    }
  }

  // MARK: Settling
  //
  // Two ways to settle, each taking the lock once: `fulfill`, the hot path of every link, and
  // `reject`, which the `Rejection` says how to carry out. `resolve` picks one for a `Result`.

  /// Fulfils the promise with `value` unless it has settled, and schedules its callbacks.
  ///
  /// The callbacks are placed (`Drain.place`) before unlocking, so that none registered later
  /// can overtake them (Docs/Design.md, "Invariants", I4); internal ones run after unlocking,
  /// before this returns.
  /// - Returns: Whether this call settled the promise.
  @discardableResult
  final func fulfill(_ value: Value) -> Bool {
    lock.lock()
    guard state.isPending else {
      lock.unlock()
      return false
    }
    // The value takes the place of these two references.
    let (upstream, extras) = storage.takeReferences()
    storage.initialize(to: value)
    guard case .schedule(let callbacks) = state.fulfill() else { preconditionFailure() }
    guard !callbacks.isEmpty else {
      settledFlag.store(true, ordering: .releasing)
      lock.unlock()
      _ = (upstream, extras)
      return true
    }
    let drain = Drain.current
    drain._withUnsafeGuaranteedRef { $0.place(callbacks) }
    // Set after placing: a callback registered without the lock (see `registerLink`) that
    // sees it queues behind the callbacks just placed.
    settledFlag.store(true, ordering: .releasing)
    lock.unlock()
    // Released here, after unlocking: a deinit they trigger may run user code.
    _ = (upstream, extras)
    drain._withUnsafeGuaranteedRef { $0.finishPlacing() }
    return true
  }

  /// Who rejects a promise: decides what a rejection does besides settling it.
  enum Rejection {
    /// The promise's work failed: a resolver, a callback that threw, an input's rejection, a
    /// timer. A `CancellationError` from the work counts as a cancellation (handlers run).
    case failure
    /// `cancel()`: runs the cancellation handlers and drops the closure of a link that has not
    /// started. Comes from outside the firing: a link lets go of its body and `upstream` here
    /// only while the promise it waits on is pending, else the thread firing it does
    /// (Docs/Design.md, "Invariants", I3).
    case cancellation
    /// A promise downstream was cancelled: a `cancellation`, made only while no live observer
    /// waits on this promise any more.
    case cancellationFromDownstream
    /// A failure found from outside the firing (the adoption cycle check): no handlers run,
    /// and a link lets go of its `upstream` as for a `cancellation`.
    case failureFromOutside
  }

  /// Rejects the promise with `error` unless it has settled, and schedules its callbacks.
  ///
  /// Releases what the pending promise held (after unlocking: a deinit may run user code),
  /// except the `upstream`, which it returns for cancellation to walk on (`nil` when the
  /// promise had settled). A cancellation also releases the closure of a link that has not
  /// started yet, so nothing a cancelled link captured stays alive while its source is pending
  /// (Docs/Design.md, "What a promise keeps, and when it lets go").
  ///
  /// A link rejected from outside its firing lets go of its closure and `upstream` only once
  /// the promise it waits on is seen pending under that promise's lock, after this rejection
  /// is published: then no firing that uses them without the lock is under way, and every
  /// firing to come finds the link settled. Otherwise a firing may be using them without the
  /// lock, and it releases them itself (Docs/Design.md, "Invariants", I3).
  @discardableResult
  final func reject(
    _ error: any Error, as rejection: Rejection = .failure
  ) -> (settled: Bool, upstream: _PromiseNode?) {
    let cancelling: Bool
    switch rejection {
    case .failure:
      // Settling twice is common (a resolver released after fulfilling, a losing input): skip
      // the dynamic cast when the promise has visibly settled already.
      if settledFlag.load(ordering: .acquiring) { return (false, nil) }
      cancelling = error is CancellationError
    case .cancellation, .cancellationFromDownstream: cancelling = true
    case .failureFromOutside: cancelling = false
    }
    lock.lock()
    guard state.isPending, !(rejection == .cancellationFromDownstream && state.hasLiveObserver),
      case .schedule(let callbacks) = state.reject(error)
    else {
      lock.unlock()
      return (false, nil)
    }
    // A link's firing may be using its body and `upstream` right now, without the lock: from
    // outside, they are left in place (a reference to `upstream` is copied for cancellation
    // to walk on) and let go below only if no firing can have begun.
    let fromOutsideALink = rejection != .failure && firesAsLink
    let upstream = self.upstream
    if !fromOutsideALink { self.upstream = nil }
    let extras = self.extras
    // Written only when set: the write is an access to the storage, and a thread firing this
    // link reads `upstream`'s word without the lock (see `hasUpstream`).
    if extras != nil { self.extras = nil }
    let body = cancelling && !fromOutsideALink ? takeBody() : nil
    // Placed before unlocking, like a fulfilment's, and before the flag is set.
    if !callbacks.isEmpty { Drain.place(callbacks) }
    settledFlag.store(true, ordering: .releasing)
    lock.unlock()
    // Released after unlocking: a deinit they trigger may run user code.
    _ = body
    if fromOutsideALink, let upstream { letGoIfNotFiring(waitingOn: upstream, cancelling: cancelling) }
    if cancelling, let extras {
      for handler in extras.cancelHandlers { handler() }
    }
    if !callbacks.isEmpty { Drain.finishPlacing() }
    return (true, upstream)
  }

  /// After a rejection from outside (published: `settledFlag` set), lets go of this link's
  /// closure (for a cancellation) and `upstream` if `source`, the promise it waits on, is
  /// still pending; otherwise leaves them to the thread firing it.
  ///
  /// `source` pending, read under its lock after this link's rejection was stored: the link is
  /// still among its callbacks (or about to be, when adopting), so no firing that uses them
  /// without the lock is under way, and the settlement that will place it takes that lock
  /// after this read, so the firing finds the link settled and touches its closure and
  /// `upstream` only under the link's lock. `source` settled: the link may be firing on the
  /// fast path, which lets go of both itself. Whoever takes one second finds `nil`.
  @inline(never)
  private func letGoIfNotFiring(waitingOn source: _PromiseNode, cancelling: Bool) {
    guard source.isPendingPromise else { return }
    letGoOfBodyAndUpstream(includingBody: cancelling)
  }

  /// Takes the closure (if `includingBody`) and `upstream` out under the lock and releases
  /// them after unlocking: whoever takes one second finds `nil`.
  ///
  /// For a link: a rejection from outside while its source is pending, a firing that finds it
  /// settled (the body was not run), or a firing whose settle a rejection beat (the body is
  /// gone already, `upstream` is left).
  @inline(never)
  final func letGoOfBodyAndUpstream(includingBody: Bool) {
    lock.lock()
    let body = includingBody ? takeBody() : nil
    let upstream = self.upstream
    self.upstream = nil
    lock.unlock()
    // Released after unlocking: a deinit they trigger may run user code.
    _ = (body, upstream)
  }

  /// Whether this promise is a link whose firing uses its closure and `upstream` without the
  /// lock (see `letGoIfNotFiring`): `DerivedPromise`.
  var firesAsLink: Bool { false }

  /// Settles the promise with `result` unless it has settled.
  /// - Returns: Whether this call settled the promise.
  @discardableResult
  final func resolve(_ result: Result<Value, any Error>) -> Bool {
    switch result {
    case .success(let value): return fulfill(value)
    case .failure(let error): return reject(error).settled
    }
  }

  /// Takes the user's closure out of a link whose body has not run, for the caller to release
  /// (after unlocking, when called under the lock); `nil` for promises that have none.
  func takeBody() -> Any? { nil }

  override final var isLiveObserver: Bool { !settledFlag.load(ordering: .acquiring) }

  /// Marks a new promise's rejection as handled (the promise `catch` returns).
  @usableFromInline
  final func markObserved() {
    lock.lock()
    flags.insert(.observed)
    lock.unlock()
  }

  /// For a link about to run: its source (the upstream that fired it), or `nil` when this
  /// promise has already settled (rejected from outside while it waited: the body must not
  /// run).
  ///
  /// No lock: once the source has fired the link, nothing but the firing thread writes its
  /// body or `upstream` unless it finds the link settled (Docs/Design.md, "Invariants", I3),
  /// so the source needs no retain of its own. What orders a rejection from outside before
  /// this load is the source's lock (the rejection reads the source pending under it before
  /// the settlement that fired this link); a link found settled is then handled under its own
  /// lock.
  @inline(__always)
  final func sourceIfNotSettled() -> Unmanaged<_PromiseNode>? {
    if settledFlag.load(ordering: .acquiring) { return nil }
    return storage.unmanagedUpstream.unsafelyUnwrapped
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
  /// a promise that stays pending. Walks the list from its oldest node.
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
    state.forEachCallback(body)
  }

  override final var isPendingPromise: Bool {
    lock.lock()
    defer { lock.unlock() }
    return state.isPending
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
    let (settled, upstream) = reject(CancellationError(), as: .cancellation)
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
    let (settled, upstream) = reject(CancellationError(), as: .cancellationFromDownstream)
    return settled ? upstream : nil
  }

  final func addCancelHandler(_ handler: @escaping @Sendable () -> Void) {
    // The first handler's storage is allocated before locking: nothing allocates under the
    // lock but the rare second handler's array growth.
    var fresh: PromiseExtras?
    while true {
      lock.lock()
      guard state.isPending else { break }
      if let extras {
        extras.cancelHandlers.append(handler)
        lock.unlock()
        return
      }
      if let fresh {
        extras = fresh
        lock.unlock()
        return
      }
      lock.unlock()
      let extras = PromiseExtras()
      extras.cancelHandlers.append(handler)
      fresh = extras
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
    promise.reject(PromiseError.brokenPromise(createdAt: promise.creationSite))
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
      token.promise.fulfill(value)
    }

    /// Rejects the promise with `error` if it is still pending.
    public func reject(_ error: any Error) {
      token.promise.reject(error)
    }

    /// Settles the promise with `result` if it is still pending.
    public func resolve(_ result: Result<Value, any Error>) {
      token.promise.resolve(result)
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
