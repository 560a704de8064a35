import Dispatch

extension Promise {
  /// Returns a promise that adopts the outcome of the promise `body` returns: the next
  /// asynchronous step.
  ///
  /// Use it to start the next step from a value: `fetchToken().then { token in
  /// fetchConfig(token) }`. `body` runs once, on `queue`, after this promise is fulfilled —
  /// never before this call returns. If this promise is rejected, `body` is skipped and the
  /// returned promise is rejected with the same error. If `body` throws or its promise is
  /// rejected, the returned promise is rejected with that error. Returning the returned
  /// promise itself (or a promise waiting on it) rejects it with `PromiseError.chainingCycle`.
  ///
  /// `then` takes only closures that return a promise. A closure that computes a value is a
  /// `map` step, one that returns nothing a `done` step: one verb per closure shape lets Swift
  /// type-check a chain link by link instead of trying every overload on every closure (see
  /// Docs/Design.md, "One verb per closure shape").
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Starts the next step.
  /// - Returns: A promise settled like the one `body` returns.
  @inlinable
  public func then<NewValue>(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (Value) throws -> Promise<NewValue>
  ) -> Promise<NewValue> {
    let next = ThenPromisePromise(source: self, queue: queue, file: file, line: line, body: body)
    registerLink(next)
    return next
  }

  /// Returns a promise fulfilled once `body` has run with this promise's value: a step that
  /// returns nothing.
  ///
  /// Use it for the steps that act on a value — apply a configuration, update the screen —
  /// where nothing is passed on but the fact that they ran: `.done(on: recorder.queue) { config
  /// in recorder.apply(config); recorder.start() }`. `body` runs once, on `queue`, after this
  /// promise is fulfilled; a rejection skips it and passes on, and a throw rejects the
  /// returned promise. As with PromiseKit's `done`, `catch`, `always` and further steps can
  /// follow.
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Uses the value.
  /// - Returns: A `Promise<Void>` fulfilled after `body` has returned.
  @inlinable
  public func done(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (Value) throws -> Void
  ) -> Promise<Void> {
    valueStep(on: queue, file: file, line: line, body)
  }

  /// The link under every step that computes a value (`map`, `done`, and the steps built on
  /// them): one node, registered on this promise.
  @inlinable
  final func valueStep<NewValue>(
    on queue: DispatchQueue, file: StaticString, line: UInt,
    _ body: @escaping @Sendable (Value) throws -> NewValue
  ) -> Promise<NewValue> {
    let next = ThenValuePromise(source: self, queue: queue, file: file, line: line, body: body)
    registerLink(next)
    return next
  }

  /// Returns a promise that replaces a rejection with the value `body` computes from the error.
  ///
  /// `body` runs on `queue` only if this promise is rejected; a fulfilled value passes through
  /// unchanged. If `body` throws, the returned promise is rejected with what it threw.
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Turns the error into a fallback value, or throws to keep a rejection.
  /// - Returns: A promise that is fulfilled unless `body` throws.
  @inlinable
  public func recover(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (any Error) throws -> Value
  ) -> Promise<Value> {
    let next = RecoverValuePromise(source: self, queue: queue, file: file, line: line, body: body)
    registerLink(next)
    return next
  }

  /// Returns a promise that replaces a rejection with the outcome of the promise `body` returns.
  ///
  /// `body` runs on `queue` only if this promise is rejected — for example to try a fallback
  /// server. A fulfilled value passes through unchanged.
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Starts the fallback work.
  /// - Returns: A promise settled like this one if fulfilled, else like `body`'s promise.
  ///
  /// `Inner` is `Promise<Value>`: the closure's type is generic so that this overload is
  /// chosen only when the closure's body returns a promise (see `_PromiseConvertible`).
  @inlinable
  public func recover<Inner: _PromiseConvertible>(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (any Error) throws -> Inner
  ) -> Promise<Value> where Inner.Value == Value {
    let next = RecoverPromisePromise(source: self, queue: queue, file: file, line: line, body: body)
    registerLink(next)
    return next
  }

  /// Observes a rejection: runs `body` with the error on `queue`, and passes the outcome on.
  ///
  /// The returned promise settles exactly like this one, after `body` has run; a rejection
  /// observed by `catch` is never reported to `UnhandledRejection.handler`. To replace the
  /// error with a value, use `recover`.
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Reports or logs the error.
  /// - Returns: A promise with this promise's outcome.
  @inlinable @discardableResult
  public func `catch`(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (any Error) -> Void
  ) -> Promise<Value> {
    let next = ObserverPromise(
      source: self, queue: queue, file: file, line: line, body: .onRejection(body))
    next.markObserved()
    registerLink(next)
    return next
  }

  /// Runs `body` on `queue` when this promise settles either way, and passes the outcome on.
  ///
  /// Use it for clean-up (hide a spinner, close a file). The returned promise settles like
  /// this one, after `body` has run.
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: The clean-up.
  /// - Returns: A promise with this promise's outcome.
  @inlinable @discardableResult
  public func always(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable () -> Void
  ) -> Promise<Value> {
    let next = ObserverPromise(source: self, queue: queue, file: file, line: line, body: .always(body))
    registerLink(next)
    return next
  }

  /// Runs `body` on `queue` with the outcome when this promise settles, and passes it on.
  ///
  /// Like `always`, but `body` sees the `Result`. Observing the outcome counts as handling
  /// a rejection.
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Receives the value or the error.
  /// - Returns: A promise with this promise's outcome.
  @inlinable @discardableResult
  public func whenSettled(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (Result<Value, any Error>) -> Void
  ) -> Promise<Value> {
    let next = ObserverPromise(
      source: self, queue: queue, file: file, line: line, body: .onResult(body))
    next.markObserved()
    registerLink(next)
    return next
  }

  /// Returns a promise fulfilled with this value if `predicate` accepts it.
  ///
  /// `predicate` runs on `queue` after fulfilment. If it returns `false` the returned promise
  /// is rejected with `PromiseError.validationFailed`; if it throws, with what it threw.
  ///
  /// - Parameters:
  ///   - queue: Where `predicate` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - predicate: Decides whether the value is acceptable.
  /// - Returns: A promise of the same value, or a rejection.
  public func validate(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ predicate: @escaping @Sendable (Value) throws -> Bool
  ) -> Promise<Value> {
    let site = CreationSite(file, UInt32(truncatingIfNeeded: line))
    return valueStep(on: queue, file: file, line: line) { value -> Value in
      guard try predicate(value) else { throw PromiseError.validationFailed(createdAt: site) }
      return value
    }
  }

  /// Returns a promise of `Void` settled when this one is: the value is dropped.
  public func asVoid(on queue: DispatchQueue = .promises) -> Promise<Void> {
    valueStep(on: queue, file: #fileID, line: #line) { _ in () }
  }
}

/// Declares the `then` for closures that return a value or nothing, which is an error.
///
/// It exists so that the compiler names the verb to use (`map` or `done`). Not for you to
/// conform to.
///
/// Why a protocol with an unavailable conformance, and not an unavailable overload on `Promise`:
/// Swift skips an unavailable overload while it looks for a solution, so a value closure handed
/// to `then` was first refuted against `Promise<U>` (every operator and literal of the body
/// tried), then solved again in the diagnostic mode with the stub in play, the refutation
/// included: a ternary of arithmetic took 0.9–1.2 s to be named, two operator links 2.5 s
/// (issue 31, TypeCheck/RESULTS.md). This `then` is available to the solver, which finds the
/// solution that uses it in the first pass, and is disfavoured, so that a closure returning a
/// promise still gets `Promise`'s own `then`; only the conformance it needs is unavailable, and
/// Swift reports that, with the message below, once the expression has been solved.
///
/// It refines `_PromiseConvertible` and declares no associated type of its own: `Value` is
/// `_PromiseConvertible`'s, whose conformance is available. With an associated type of its
/// own, `Promise<Int>.Value` named the type witness of this unavailable conformance, and a
/// user's `Promise<Int>.Value` no longer compiled.
public protocol _ThenTakesAPromise: _PromiseConvertible {}

@available(
  *, unavailable,
  message:
    "'then' takes a closure that returns a promise; use 'map' for a closure that returns a value, 'done' for one that returns nothing"
)
extension Promise: _ThenTakesAPromise {}

extension _ThenTakesAPromise {
  /// A closure that returns a value or nothing is a `map` or a `done` step, not a `then` step:
  /// using this overload is an error, which names them (see `_ThenTakesAPromise`).
  @_disfavoredOverload
  public func then<NewValue>(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (Value) throws -> NewValue
  ) -> Promise<NewValue> {
    fatalError("unavailable")
  }
}
