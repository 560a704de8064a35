/// Resumes a continuation when the promise it is registered on settles.
final class ContinuationNode<Value: Sendable>: _PromiseNode, @unchecked Sendable {
  // Safety: the continuation is resumed once, by the single firing thread; `source` is set
  // by `register` before the node is published.
  private let continuation: UnsafeContinuation<Value, any Error>
  private var source: Promise<Value>?

  init(_ continuation: UnsafeContinuation<Value, any Error>) {
    self.continuation = continuation
    super.init(queue: nil)
  }

  override func willRegister(on source: _PromiseNode) {
    self.source = unsafeDowncast(source, to: Promise<Value>.self)
  }

  override var downstream: Downstream { .none }

  override func fire() {
    let source = self.source.unsafelyUnwrapped
    self.source = nil
    continuation.resume(with: source.settledResult)
  }
}

extension Promise {
  /// The value, awaited without blocking a thread; throws the rejection error.
  ///
  /// Cancelling the awaiting task cancels this promise (`cancel()`): the promise is rejected
  /// with `CancellationError` — for every observer, since a promise has one outcome — and its
  /// work is cancelled where nobody else waits on it. To await a shared promise without
  /// cancelling it for the others, await a promise chained from it, such as `then { $0 }`:
  /// cancelling that one stops only at the shared promise, which has other observers.
  public var value: Value {
    get async throws {
      if let result { return try result.get() }
      return try await withTaskCancellationHandler {
        try await withUnsafeThrowingContinuation { continuation in
          register(ContinuationNode(continuation))
        }
      } onCancel: {
        self.cancel()
      }
    }
  }

  /// Creates a promise of what the async `body` returns, running it in a new `Task`.
  ///
  /// The task starts at once. The promise is fulfilled with `body`'s result or rejected with
  /// what it throws. Cancelling the promise cancels the task (cooperatively: `body` sees
  /// `Task.isCancelled`, and the promise is rejected with `CancellationError` at once).
  ///
  /// - Parameters:
  ///   - priority: The task's priority; inherited by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  ///   - body: The async work.
  ///
  /// The closure is labeled `operation`, as `Task`'s is, and is written as a trailing closure:
  /// `Promise { try await compute() }`. Unlabeled, it made every `Promise(literal)` an
  /// overload search: Swift tried the literal as the closure too, and `Promise(8).map { … }`
  /// with a ternary failed to type-check (see Docs/Design.md, "One verb per closure shape").
  public convenience init(
    priority: TaskPriority? = nil, file: StaticString = #fileID, line: UInt = #line,
    operation body: @escaping @Sendable () async throws -> Value
  ) {
    self.init(queue: nil, file: file, line: line)
    let resolver = Resolver(ResolverToken(self))
    let task = Task(priority: priority) {
      do {
        resolver.fulfill(try await body())
      } catch {
        resolver.reject(error)
      }
    }
    addCancelHandler { task.cancel() }
  }

  /// Use `init(operation:)`: the async closure is labeled, or written as a trailing closure.
  @available(*, unavailable, renamed: "init(priority:file:line:operation:)")
  public convenience init(
    priority: TaskPriority? = nil, file: StaticString = #fileID, line: UInt = #line,
    _ body: @escaping @Sendable () async throws -> Value
  ) {
    fatalError("unavailable")
  }
}
