extension Promise.Resolver {
  /// Settles the promise from a Cocoa-style completion: a value, or an error.
  ///
  /// Pass it where an API expects a `(Value?, Error?) -> Void` completion handler:
  /// `Promise<Data> { resolver in store.load(key, completion: resolver.resolve) }`. An error
  /// wins over a value when both are given; when both are `nil` the promise is rejected with
  /// `PromiseError.invalidCallback`, so it never hangs. Only the first call counts.
  ///
  /// - Parameters:
  ///   - value: The value, if the operation succeeded.
  ///   - error: The error, if it failed.
  public func resolve(_ value: Value?, _ error: (any Error)?) {
    if let error {
      reject(error)
    } else if let value {
      fulfill(value)
    } else {
      reject(
        PromiseError.invalidCallback(
          reason: "the completion handler was called with neither a value nor an error",
          createdAt: token.promise.creationSite))
    }
  }
}

extension Promise.Resolver where Value == Void {
  /// Settles a `Promise<Void>` from a completion that passes only an optional error.
  ///
  /// Pass it where an API expects an `(Error?) -> Void` completion handler:
  /// `Promise<Void> { resolver in file.close(completion: resolver.resolve) }`. `nil` fulfils
  /// the promise, an error rejects it. Only the first call counts.
  ///
  /// - Parameter error: The error, or `nil` on success.
  public func resolve(_ error: (any Error)?) {
    if let error {
      reject(error)
    } else {
      fulfill(())
    }
  }
}

extension Promise {
  /// Returns a promise settled by the completion handler that `body` hands to an API, for
  /// handlers of the form `(Value?, Error?) -> Void`.
  ///
  /// `body` runs at once, synchronously, with the handler: `Promise<Data>.wrap { done in
  /// store.load(key, completion: done) }`. The API may call the handler on any thread. An
  /// error wins over a value when both are given; when both are `nil` the promise is rejected
  /// with `PromiseError.invalidCallback`; calls after the first are ignored. If `body` throws,
  /// the promise is rejected with that error. If the handler is released without being called,
  /// the promise is rejected with `PromiseError.brokenPromise`.
  ///
  /// - Parameters:
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Starts the operation, passing it the handler.
  /// - Returns: A promise of the value the handler receives.
  public static func wrap(
    file: StaticString = #fileID, line: UInt = #line,
    _ body: (@escaping @Sendable (Value?, (any Error)?) -> Void) throws -> Void
  ) -> Promise<Value> {
    Promise(file: file, line: line) { resolver in
      try body { value, error in resolver.resolve(value, error) }
    }
  }

  /// Returns a promise settled by the completion handler that `body` hands to an API, for
  /// handlers of the form `(Result<Value, Error>) -> Void`.
  ///
  /// `body` runs at once, synchronously, with the handler: `Promise<User>.wrap { done in
  /// api.fetchUser(id, completion: done) }`. The API may call the handler on any thread;
  /// calls after the first are ignored. If `body` throws, the promise is rejected with that
  /// error. If the handler is released without being called, the promise is rejected with
  /// `PromiseError.brokenPromise`.
  ///
  /// - Parameters:
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Starts the operation, passing it the handler.
  /// - Returns: A promise of the value the handler receives.
  public static func wrap(
    file: StaticString = #fileID, line: UInt = #line,
    _ body: (@escaping @Sendable (Result<Value, any Error>) -> Void) throws -> Void
  ) -> Promise<Value> {
    Promise(file: file, line: line) { resolver in
      try body { result in resolver.resolve(result) }
    }
  }
}

extension Promise where Value == Void {
  /// Returns a promise settled by the completion handler that `body` hands to an API, for
  /// handlers of the form `(Error?) -> Void`.
  ///
  /// `body` runs at once, synchronously, with the handler: `Promise<Void>.wrap { done in
  /// file.close(completion: done) }`. `nil` fulfils the promise, an error rejects it; calls
  /// after the first are ignored. If `body` throws, the promise is rejected with that error.
  /// If the handler is released without being called, the promise is rejected with
  /// `PromiseError.brokenPromise`.
  ///
  /// - Parameters:
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: Starts the operation, passing it the handler.
  /// - Returns: A `Promise<Void>` settled by the handler.
  public static func wrap(
    file: StaticString = #fileID, line: UInt = #line,
    _ body: (@escaping @Sendable ((any Error)?) -> Void) throws -> Void
  ) -> Promise<Void> {
    Promise<Void>(file: file, line: line) { resolver in
      try body { error in resolver.resolve(error) }
    }
  }
}
