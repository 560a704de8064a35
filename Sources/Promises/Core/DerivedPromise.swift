import Dispatch

/// A promise computed from the outcome of another: the node behind `then`, `recover`,
/// `catch` and `always`.
///
/// One link of a chain is one `DerivedPromise` object (plus the user's closure context):
/// it is the promise the caller gets back and, at the same time, the callback record that
/// waits in its source's list. Cost of a link: one allocation, one lock acquisition to
/// register, one to settle (the check for cancellation before running the body is one load),
/// and no dispatch of its own when the source settles on a drain of the same queue.
@usableFromInline
class DerivedPromise<Input: Sendable, Value: Sendable>: Promise<Value>, @unchecked Sendable {
  @usableFromInline
  init(source: Promise<Input>, queue: DispatchQueue, file: StaticString, line: UInt) {
    super.init(queue: queue, file: file, line: line, upstream: source)
  }

  final override func fire() {
    // Not settled: this thread owns the body and the source, which stays referenced (as
    // `upstream`) until this promise settles; a rejection from outside from now on leaves
    // both alone, so the source is used here without a retain of its own (Docs/Design.md,
    // "Invariants", I3).
    guard let source = sourceIfNotSettled() else {
      // Rejected from outside while waiting: the body must not run (its side effects were
      // cancelled too).
      letGoOfBodyAndUpstream(includingBody: true)
      return
    }
    let outcome =
      isAdopting
      ? finishAdopting(source)
      : source._withUnsafeGuaranteedRef { run(unsafeDowncast($0, to: Promise<Input>.self)) }
    // Adopting: the link now belongs to the inner promise, which may fire it any moment.
    guard outcome == .settled else { return }
    // Settling released `upstream`, unless a cancellation won the race and the settle was
    // ignored: then this thread, which owns it, lets it go.
    if hasUpstream { letGoOfBodyAndUpstream(includingBody: false) }
  }

  /// Whether the link is in its second phase, adopting another promise's outcome.
  ///
  /// A link is made with a queue for its closure and drops it when it starts adopting: the
  /// inner promise's settlement then fires it inline. No flag of its own: a byte more would
  /// take a link past 88 bytes (see `LinkSizeTests`). Only the thread that fires the link
  /// reads or writes `queue` here; the inner promise's lock orders the hand-off.
  @inline(__always)
  private var isAdopting: Bool { queue == nil }

  /// Settles this promise with the outcome of the promise it adopted, which has settled.
  ///
  /// Out of line: its copy of the value needs stack space sized at run time, which `fire`
  /// would otherwise set up for every link.
  @inline(never)
  private func finishAdopting(_ adopted: Unmanaged<_PromiseNode>) -> RunOutcome {
    adopted._withUnsafeGuaranteedRef { source in
      let inner = unsafeDowncast(source, to: Promise<Value>.self)
      if inner.state.phase == .fulfilled {
        fulfill(inner.loadValue())
      } else {
        reject(inner.state.error.unsafelyUnwrapped)
      }
      return .settled
    }
  }

  /// What `run` did.
  enum RunOutcome {
    /// The link has started adopting another promise: it must not be touched any more.
    case adopting
    /// The link settled (or tried to: a cancellation may have come first).
    case settled
  }

  /// Computes the outcome from the settled `source`; fulfils, rejects or adopts.
  ///
  /// Reads the source's fields directly rather than building a `Result`: in unspecialized
  /// generic code every `Result<Input, …>` costs a run-time metadata look-up. The closure is
  /// moved out of the link first and released before the outcome is published: what it
  /// captured is gone by the time anyone sees this promise settled.
  ///
  /// Every link kind overrides it and `takeBody`: the defaults trap, since a link that
  /// silently did nothing would leave its chain hanging.
  func run(_ source: Promise<Input>) -> RunOutcome {
    preconditionFailure("Promises: \(type(of: self)) does not override run(_:)")
  }

  override func takeBody() -> Any? {
    preconditionFailure("Promises: \(type(of: self)) does not override takeBody()")
  }

  override final var firesAsLink: Bool { true }

  /// Passes `source`'s value on unchanged (a `recover` or observer whose closure is skipped).
  @inline(__always)
  final func passOn(valueOf source: Promise<Value>) -> RunOutcome {
    fulfill(source.loadValue())
    return .settled
  }

  /// Passes `source`'s error on unchanged (a `then` whose closure is skipped).
  @inline(__always)
  final func passOn<Source>(errorOf source: Promise<Source>) -> RunOutcome {
    reject(source.state.error.unsafelyUnwrapped)
    return .settled
  }

  /// Calls the link's closure with `argument` and fulfils this promise with what it returns,
  /// or rejects it with what it throws; the closure is released first (see `run`).
  @inline(__always)
  final func fulfill<Argument>(
    calling body: consuming @escaping @Sendable (Argument) throws -> Value, with argument: Argument
  ) -> RunOutcome {
    // `value` is bound inside `do`: declared before it, the result would be moved through a
    // second temporary (in the unspecialized code a link runs, one more value-witness call).
    do {
      let value = try body(argument)
      _ = consume body
      fulfill(value)
    } catch {
      _ = consume body
      reject(error)
    }
    return .settled
  }

  /// Calls the link's closure with `argument` and adopts the promise it returns, or rejects
  /// this promise with what it throws; the closure is released first (see `run`).
  @inline(__always)
  final func adopt<Argument, Inner: _PromiseConvertible>(
    calling body: consuming @escaping @Sendable (Argument) throws -> Inner, with argument: Argument
  ) -> RunOutcome where Inner.Value == Value {
    do {
      let inner = try body(argument)._promise
      _ = consume body
      return adopt(inner) ? .adopting : .settled
    } catch {
      _ = consume body
      reject(error)
      return .settled
    }
  }

  /// Settles this promise with the outcome of `inner`, once that settles.
  ///
  /// Rejects with `PromiseError.chainingCycle` instead when `inner` is this promise or waits
  /// on it, directly or through any chain of promises and aggregates. The link to `inner` is
  /// published in both directions (this promise's `upstream`, and this link in `inner`'s
  /// callbacks) before the check, which needs both (see `adoptionClosesCycle`).
  /// - Returns: Whether the link now belongs to `inner` (and must not be touched any more):
  ///   `inner` fires it, even when the check has meanwhile rejected it for a cycle.
  final func adopt(_ inner: Promise<Value>) -> Bool {
    if inner === self {
      reject(PromiseError.chainingCycle(createdAt: creationSite))
      return false
    }
    lock.lock()
    guard state.isPending else {
      lock.unlock()
      // Cancelled meanwhile: nobody else waits on the inner work.
      Promise<Value>.propagateCancellation(from: inner)
      return false
    }
    // `inner` takes the source's place: until `inner` fires this link, a cancellation that
    // finds `inner` pending lets go of it (I3).
    let source = upstream
    upstream = inner
    // Adopting is what `queue == nil` means for a link (see `isAdopting`).
    queue = nil
    lock.unlock()
    // Released after unlocking: this may be the source's last reference (the drain that
    // fired this link holds none), and its deinit may run user code.
    withExtendedLifetime(source) {}
    inner.register(self)
    // From here `inner` may fire this link at any moment, on any thread; the drain that
    // fired it keeps it alive until this returns. A rejection for a cycle settles it first,
    // and the later firing finds it settled and does nothing. The rejection comes from
    // outside the firing: it lets go of `inner` only while `inner` is pending (I3).
    if _PromiseNode.adoptionClosesCycle(adopter: self, inner: inner).closesCycle {
      reject(PromiseError.chainingCycle(createdAt: creationSite), as: .failureFromOutside)
    }
    return true
  }
}

// The four closure links below (`then` and `recover`, each with a closure returning a value or
// a promise) repeat one pattern — store the closure, move it out in `run`, drop it in
// `takeBody` — on purpose. Each stores its closure with exactly the abstraction of the public
// method's parameter, so the caller's closure goes in as it is. Any shared code generic over
// the closure type (a generic helper, `Optional.take()`, a generic field, an enum of the four)
// needs a reabstraction thunk or a metadata look-up per link in unspecialized code, or a tag
// byte that takes a link past its chunk (then 104 bytes): measured with `Optional.take()`,
// `chain` went from 0.88–1.22× to 1.35–1.41× Dispatch and `deep-chain` from 1.19–1.57× to 2.06–2.84×
// (Docs/Performance.md, "Registering on a fulfilled promise without its lock").

/// `then` with a closure returning a value.
@usableFromInline
final class ThenValuePromise<Input: Sendable, Value: Sendable>: DerivedPromise<Input, Value>,
  @unchecked Sendable
{
  // Safety: `body` is written at init; then moved out without the lock only by a firing that
  // found the link not settled, and otherwise taken under the link's lock (Docs/Design.md, I3).
  @exclusivity(unchecked) private var body: (@Sendable (Input) throws -> Value)?

  @usableFromInline
  init(
    source: Promise<Input>, queue: DispatchQueue, file: StaticString, line: UInt,
    body: @escaping @Sendable (Input) throws -> Value
  ) {
    self.body = body
    super.init(source: source, queue: queue, file: file, line: line)
  }

  override func run(_ source: Promise<Input>) -> RunOutcome {
    // Moved out of the link (no retain), and released before the outcome is published: what
    // the closure captured is gone by the time anyone sees this promise settled.
    let body = self.body.unsafelyUnwrapped
    self.body = nil
    guard source.state.phase == .fulfilled else {
      _ = consume body
      return passOn(errorOf: source)
    }
    return fulfill(calling: body, with: source.loadValue())
  }

  override func takeBody() -> Any? {
    defer { body = nil }
    return body
  }
}

/// `then` with a closure returning a promise, whose outcome is adopted.
@usableFromInline
final class ThenPromisePromise<Input: Sendable, Value: Sendable>: DerivedPromise<Input, Value>,
  @unchecked Sendable
{
  // Safety: as for `ThenValuePromise`.
  @exclusivity(unchecked) private var body: (@Sendable (Input) throws -> Promise<Value>)?

  @usableFromInline
  init(
    source: Promise<Input>, queue: DispatchQueue, file: StaticString, line: UInt,
    body: @escaping @Sendable (Input) throws -> Promise<Value>
  ) {
    self.body = body
    super.init(source: source, queue: queue, file: file, line: line)
  }

  override func run(_ source: Promise<Input>) -> RunOutcome {
    // As in `ThenValuePromise.run`.
    let body = self.body.unsafelyUnwrapped
    self.body = nil
    guard source.state.phase == .fulfilled else {
      _ = consume body
      return passOn(errorOf: source)
    }
    return adopt(calling: body, with: source.loadValue())
  }

  override func takeBody() -> Any? {
    defer { body = nil }
    return body
  }
}

/// `recover` with a closure returning a value.
@usableFromInline
final class RecoverValuePromise<Value: Sendable>: DerivedPromise<Value, Value>, @unchecked Sendable {
  // Safety: as for `ThenValuePromise`.
  @exclusivity(unchecked) private var body: (@Sendable (any Error) throws -> Value)?

  @usableFromInline
  init(
    source: Promise<Value>, queue: DispatchQueue, file: StaticString, line: UInt,
    body: @escaping @Sendable (any Error) throws -> Value
  ) {
    self.body = body
    super.init(source: source, queue: queue, file: file, line: line)
  }

  override func run(_ source: Promise<Value>) -> RunOutcome {
    // As in `ThenValuePromise.run`.
    let body = self.body.unsafelyUnwrapped
    self.body = nil
    guard source.state.phase == .rejected else {
      _ = consume body
      return passOn(valueOf: source)
    }
    return fulfill(calling: body, with: source.state.error.unsafelyUnwrapped)
  }

  override func takeBody() -> Any? {
    defer { body = nil }
    return body
  }
}

/// `recover` with a closure returning a promise, whose outcome is adopted.
///
/// Generic over what the closure returns (`Inner`, a `Promise` in practice) rather than over
/// the value, so that `recover` can take a closure returning `some _PromiseConvertible`; see
/// `_PromiseConvertible` for why. Converting a `(any Error) throws -> Inner` closure to one
/// returning `Promise<Value>` would need a thunk, one more allocation per link; storing it as
/// it is needs none.
@usableFromInline
final class RecoverPromisePromise<Inner: _PromiseConvertible>: DerivedPromise<Inner.Value, Inner.Value>,
  @unchecked Sendable
{
  // Safety: as for `ThenValuePromise`.
  @exclusivity(unchecked) private var body: (@Sendable (any Error) throws -> Inner)?

  @usableFromInline
  init(
    source: Promise<Inner.Value>, queue: DispatchQueue, file: StaticString, line: UInt,
    body: @escaping @Sendable (any Error) throws -> Inner
  ) {
    self.body = body
    super.init(source: source, queue: queue, file: file, line: line)
  }

  override func run(_ source: Promise<Inner.Value>) -> RunOutcome {
    // As in `ThenValuePromise.run`.
    let body = self.body.unsafelyUnwrapped
    self.body = nil
    guard source.state.phase == .rejected else {
      _ = consume body
      return passOn(valueOf: source)
    }
    return adopt(calling: body, with: source.state.error.unsafelyUnwrapped)
  }

  override func takeBody() -> Any? {
    defer { body = nil }
    return body
  }
}

/// `catch`, `always` and `whenSettled`: run a closure, pass the outcome on unchanged.
@usableFromInline
final class ObserverPromise<Value: Sendable>: DerivedPromise<Value, Value>, @unchecked Sendable {
  @usableFromInline
  enum Body {
    case onRejection(@Sendable (any Error) -> Void)
    case always(@Sendable () -> Void)
    case onResult(@Sendable (Result<Value, any Error>) -> Void)
  }

  // Safety: as for `ThenValuePromise`.
  @exclusivity(unchecked) private var body: Body?

  @usableFromInline
  init(source: Promise<Value>, queue: DispatchQueue, file: StaticString, line: UInt, body: Body) {
    self.body = body
    super.init(source: source, queue: queue, file: file, line: line)
  }

  override func run(_ source: Promise<Value>) -> RunOutcome {
    // Moved out of the link (no retain) and released before the outcome is published, as in
    // `ThenValuePromise.run`.
    let body = self.body.unsafelyUnwrapped
    self.body = nil
    let input = source.settledResult
    switch (body, input) {
    case (.onRejection(let handler), .failure(let error)): handler(error)
    case (.onRejection, .success): break
    case (.always(let handler), _): handler()
    case (.onResult(let handler), _): handler(input)
    }
    _ = consume body
    resolve(input)
    return .settled
  }

  override func takeBody() -> Any? {
    defer { body = nil }
    return body
  }
}
