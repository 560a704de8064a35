import Dispatch
import Foundation
import Promises
import Testing

private typealias Kit = CombinatorTestKit

/// A stand-in for a callback-based API: calls its completion later, on another queue.
private enum LegacyAPI {
  static let queue = DispatchQueue(label: "adapters.legacy", attributes: .concurrent)

  static func load(
    value: Int?, error: (any Error)?, completion: @escaping @Sendable (Int?, (any Error)?) -> Void
  ) {
    queue.async { completion(value, error) }
  }

  static func fetch(
    _ result: Result<String, any Error>, completion: @escaping @Sendable (Result<String, any Error>) -> Void
  ) {
    queue.async { completion(result) }
  }

  static func close(error: (any Error)?, completion: @escaping @Sendable ((any Error)?) -> Void) {
    queue.async { completion(error) }
  }
}

@Suite("Completion-handler adapters", .timeLimit(.minutes(1)))
struct PromiseAdaptersTests {
  @Test("a Cocoa-style value fulfils the promise")
  func cocoaValue() async throws {
    let wrapped = Promise<Int>.wrap { done in LegacyAPI.load(value: 5, error: nil, completion: done) }
    #expect(try await wrapped.value == 5)
    let resolved = Promise<Int> { resolver in
      LegacyAPI.load(value: 6, error: nil, completion: resolver.resolve)
    }
    #expect(try await resolved.value == 6)
  }

  @Test("a Cocoa-style error rejects the promise, and wins over a value")
  func cocoaErrorWins() async throws {
    let rejected = Promise<Int>.wrap { done in
      LegacyAPI.load(value: nil, error: Kit.Failure(1), completion: done)
    }
    await #expect(throws: Kit.Failure(1)) { try await rejected.value }
    let both = Promise<Int>.wrap { done in
      LegacyAPI.load(value: 7, error: Kit.Failure(2), completion: done)
    }
    await #expect(throws: Kit.Failure(2)) { try await both.value }
  }

  @Test("neither value nor error rejects with invalidCallback instead of hanging")
  func cocoaNeither() async throws {
    let wrapped = Promise<Int>.wrap { done in LegacyAPI.load(value: nil, error: nil, completion: done) }
    let expected = PromiseError.invalidCallback(
      reason: "the completion handler was called with neither a value nor an error",
      createdAt: wrapped.creationSite)
    await #expect(throws: expected) { try await wrapped.value }
    let resolved = Promise<Int> { resolver in resolver.resolve(nil, nil) }
    await #expect(throws: PromiseError.self) { try await resolved.value }
    do {
      _ = try await resolved.value
    } catch let error as PromiseError {
      #expect("\(error)".contains("neither a value nor an error"))
    }
  }

  @Test("a Result-style completion fulfils or rejects")
  func resultStyle() async throws {
    let fulfilled = Promise<String>.wrap { done in LegacyAPI.fetch(.success("hi"), completion: done) }
    #expect(try await fulfilled.value == "hi")
    let rejected = Promise<String>.wrap { done in
      LegacyAPI.fetch(.failure(Kit.Failure(3)), completion: done)
    }
    await #expect(throws: Kit.Failure(3)) { try await rejected.value }
    let resolved = Promise<String> { resolver in LegacyAPI.fetch(.success("yo"), completion: resolver.resolve)
    }
    #expect(try await resolved.value == "yo")
  }

  @Test("an error-only completion fulfils on nil and rejects on an error")
  func voidStyle() async throws {
    try await Promise<Void>.wrap { done in LegacyAPI.close(error: nil, completion: done) }.value
    let rejected = Promise<Void>.wrap { done in LegacyAPI.close(error: Kit.Failure(4), completion: done) }
    await #expect(throws: Kit.Failure(4)) { try await rejected.value }
    try await Promise<Void> { resolver in LegacyAPI.close(error: nil, completion: resolver.resolve) }.value
  }

  @Test("a second call of the handler is ignored")
  func secondCallIgnored() async throws {
    let wrapped = Promise<Int>.wrap { done in
      done(1, nil)
      done(2, nil)
      done(nil, Kit.Failure(5))
    }
    #expect(try await wrapped.value == 1)
    let voided = Promise<Void>.wrap { done in
      done(Kit.Failure(6))
      done(nil)
    }
    await #expect(throws: Kit.Failure(6)) { try await voided.value }
  }

  @Test("a handler called synchronously settles at once; callbacks still run on their queue")
  func callbacksStayAsynchronous() async throws {
    let queue = DispatchQueue(label: "adapters.callback")
    let wrapped = Promise<Int>.wrap { done in done(1, nil) }
    #expect(wrapped.isFulfilled)
    let chained = wrapped.map(on: queue) { value -> Int in
      dispatchPrecondition(condition: .onQueue(queue))
      return value + 1
    }
    #expect(try await chained.value == 2)
  }

  @Test("a handler released without being called breaks the promise")
  func releasedHandlerBreaks() async throws {
    let wrapped = Promise<Int>.wrap { (_: @escaping @Sendable (Int?, (any Error)?) -> Void) in }
    await #expect(throws: PromiseError.brokenPromise(createdAt: wrapped.creationSite)) {
      try await wrapped.value
    }
  }

  @Test("a throwing body rejects the promise")
  func throwingBody() async throws {
    let wrapped = Promise<Int>.wrap { (_: @escaping @Sendable (Int?, (any Error)?) -> Void) in
      throw Kit.Failure(7)
    }
    await #expect(throws: Kit.Failure(7)) { try await wrapped.value }
  }

  @Test("cancelling a wrapped promise makes a later completion a no-op")
  func cancelledThenCompleted() async throws {
    let handler = Kit.Locked<(@Sendable (Int?, (any Error)?) -> Void)?>(nil)
    let wrapped = Promise<Int>.wrap { done in handler.withValue { $0 = done } }
    wrapped.cancel()
    handler.value?(1, nil)
    await #expect(throws: CancellationError.self) { try await wrapped.value }
    handler.withValue { $0 = nil }
  }

  @Test("the handler does not keep the promise's value alive after settlement")
  func nothingRetained() async throws {
    let weakValue: Kit.Weak
    var wrapped: Promise<Kit.Canary>?
    do {
      let canary = Kit.Canary()
      weakValue = Kit.Weak(canary)
      wrapped = Promise<Kit.Canary>.wrap { done in
        LegacyAPI.queue.async { done(canary, nil) }
      }
    }
    #expect(try await wrapped!.value.name == "canary")
    wrapped = nil
    #expect(await Kit.eventually { weakValue.isReleased })
  }
}
