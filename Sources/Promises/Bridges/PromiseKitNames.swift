import Dispatch

// PromiseKit's names that this library spells differently, declared unavailable so that code
// moved from PromiseKit gets a compiler error naming the replacement (with a fix-it where the
// rename is direct) instead of "cannot find 'firstly' in scope". None of them can be called.
// PromiseKit's `then`, `map`, `done`, `recover`, `compactMap`, `get`, `tap`, `asVoid` and `catch` exist here
// under the same names, so they are not listed. See Docs/MigratingFromPromiseKit.md.

/// PromiseKit's `firstly`: not needed here, start the chain with the promise itself.
@available(
  *, unavailable,
  message: "start the chain with the promise itself: 'firstly { p }.then { … }' is 'p.then { … }'"
)
public func firstly<Value: Sendable>(execute body: () throws -> Promise<Value>) -> Promise<Value> {
  fatalError("unavailable")
}

/// PromiseKit's `when(fulfilled:)` for an array: use `Promise.all(_:)`.
@available(*, unavailable, renamed: "Promise.all(_:)")
public func when<Value: Sendable>(fulfilled promises: [Promise<Value>]) -> Promise<[Value]> {
  fatalError("unavailable")
}

/// PromiseKit's `when(fulfilled:_:…)` for promises of different types: use `Promise.all(_:…)`.
@available(
  *, unavailable,
  message: "use 'Promise.all(a, b, …)': a promise of a tuple, for any number of promises of any types"
)
public func when<each Value: Sendable>(
  fulfilled promises: repeat Promise<each Value>
) -> Promise<(repeat each Value)> {
  fatalError("unavailable")
}

/// PromiseKit's `when(resolved:)`: use `Promise.allSettled(_:)`.
@available(*, unavailable, renamed: "Promise.allSettled(_:)")
public func when<Value: Sendable>(
  resolved promises: [Promise<Value>]
) -> Promise<[Result<Value, any Error>]> {
  fatalError("unavailable")
}

/// PromiseKit's `after(seconds:)`: use `Promise.after(_:)` with a `Duration`.
@available(*, unavailable, message: "use 'Promise.after(.seconds(n))', or 'delay(_:)' on a promise")
public func after(seconds: Double) -> Promise<Void> {
  fatalError("unavailable")
}

/// PromiseKit's `after(_:)` taking a `DispatchTimeInterval`: use `Promise.after(_:)`.
@available(
  *, unavailable, message: "use 'Promise.after(_:)' with a Duration: 'Promise.after(.milliseconds(500))'"
)
public func after(_ interval: DispatchTimeInterval) -> Promise<Void> {
  fatalError("unavailable")
}

extension Promise {
  /// PromiseKit's `Promise.value(_:)`: use `Promise(_:)`.
  @available(*, unavailable, message: "use 'Promise(value)': 'Promise.value(x)' is 'Promise(x)'")
  public static func value(_ value: Value) -> Promise<Value> {
    fatalError("unavailable")
  }

  /// PromiseKit's `ensure`: use `always`, which passes the outcome on the same way.
  @available(*, unavailable, renamed: "always(on:_:)")
  public func ensure(on queue: DispatchQueue = .promises, _ body: @escaping @Sendable () -> Void) -> Promise<
    Value
  > {
    fatalError("unavailable")
  }

  /// PromiseKit's `wait()`, which can block forever: use `wait(timeout:)`.
  @available(
    *, unavailable,
    message:
      "use 'wait(timeout:)', which throws PromiseError.timedOut instead of blocking forever, or 'try await promise.value'"
  )
  public func wait() throws -> Value {
    fatalError("unavailable")
  }
}
