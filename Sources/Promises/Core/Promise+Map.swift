import Dispatch

extension Promise {
  /// Returns a promise of what `transform` computes from this promise's value.
  ///
  /// The step for a closure that returns a value, under the name PromiseKit, `Sequence` and
  /// `Result` use. It never adopts a promise: a `transform` returning a `Promise<U>` gives a
  /// `Promise<Promise<U>>`; use `then` to start an asynchronous step.
  /// `transform` runs once, on `queue`, after this promise is fulfilled; a rejection skips it
  /// and passes on, and a throw rejects the returned promise. (The fan-out over an array is
  /// the static `Promise.map(_:maxConcurrent:_:)`.)
  ///
  /// - Parameters:
  ///   - queue: Where `transform` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - transform: Turns the value into the next value.
  /// - Returns: A promise of `transform`'s result.
  @inlinable
  public func map<NewValue>(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ transform: @escaping @Sendable (Value) throws -> NewValue
  ) -> Promise<NewValue> {
    valueStep(on: queue, file: file, line: line, transform)
  }

  /// A closure that returns a promise is a `then` step, which adopts the promise's outcome.
  ///
  /// Unavailable, and skipped by Swift while it looks for a solution: `map` with such a closure
  /// still compiles, to a promise of a promise, when nothing after it needs the inner value.
  /// When something does (`.map { avatar in avatar.url }`), this overload is the one fix that
  /// makes the chain type-check, and the compiler names `then` instead of "cannot be resolved".
  ///
  /// Disfavoured: when a chain fails, Swift solves it again with unavailable overloads in play
  /// to find a diagnosis, and without `@_disfavoredOverload` this one made failing chains up to
  /// 3.6x as expensive to diagnose (issue 31, TypeCheck/RESULTS.md).
  @available(
    *, unavailable,
    message:
      "'map' with a closure that returns a promise gives a promise of a promise; use 'then' to adopt its outcome"
  )
  @_disfavoredOverload
  public func map<NewValue>(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ transform: @escaping @Sendable (Value) throws -> Promise<NewValue>
  ) -> Promise<NewValue> {
    fatalError("unavailable")
  }

  /// Returns a promise of what `transform` computes from this promise's value, rejected with
  /// `PromiseError.compactMapReturnedNil` when `transform` returns `nil`.
  ///
  /// Use it to turn "no value" into an error inside a chain: `fetchUsers().compactMap { users
  /// in users.first }`. `transform` runs on `queue` after this promise is fulfilled; a
  /// rejection skips it and passes on, and a throw rejects the returned promise with what was
  /// thrown.
  ///
  /// - Parameters:
  ///   - queue: Where `transform` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - transform: Turns the value into the next value, or `nil` when there is none.
  /// - Returns: A promise of the unwrapped result, or a rejection.
  public func compactMap<NewValue>(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ transform: @escaping @Sendable (Value) throws -> NewValue?
  ) -> Promise<NewValue> {
    let site = CreationSite(file, UInt32(truncatingIfNeeded: line))
    return valueStep(on: queue, file: file, line: line) { value -> NewValue in
      guard let transformed = try transform(value) else {
        throw PromiseError.compactMapReturnedNil(createdAt: site)
      }
      return transformed
    }
  }

  /// Runs `body` with the value on `queue`, then passes the value on: a side effect in a chain.
  ///
  /// `body` runs after this promise is fulfilled, and is skipped on a rejection, which passes
  /// on. If `body` throws, the returned promise is rejected with what it threw; otherwise it
  /// is fulfilled with this promise's value. To see a rejection as well, use `tap`.
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Uses the value (logs it, stores it).
  /// - Returns: A promise of this promise's value, after `body` has run.
  public func get(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (Value) throws -> Void
  ) -> Promise<Value> {
    valueStep(on: queue, file: file, line: line) { value -> Value in
      try body(value)
      return value
    }
  }

  /// Runs `body` with the outcome on `queue` when this promise settles, and passes it on.
  ///
  /// For logging and debugging a chain. Unlike `whenSettled` and `catch`, seeing a rejection
  /// here does not count as handling it: if nothing after `tap` handles it, it is still
  /// reported to `UnhandledRejection.handler`.
  ///
  /// - Parameters:
  ///   - queue: Where `body` runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Receives the value or the error.
  /// - Returns: A promise with this promise's outcome, after `body` has run.
  @inlinable
  public func tap(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable (Result<Value, any Error>) -> Void
  ) -> Promise<Value> {
    let next = ObserverPromise(
      source: self, queue: queue, file: file, line: line, body: .onResult(body))
    registerLink(next)
    return next
  }
}
