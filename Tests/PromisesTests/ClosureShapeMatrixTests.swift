import Dispatch
import Testing

@testable import Promises

// The closure-shape matrix of Docs/Design.md ("One verb per closure shape"): every closure
// shape a step takes (rows), each with its verb — `map` for a closure that returns a value,
// `done` for one that returns nothing, `then` for one that returns a promise — in every
// position a chain is written in (columns), without annotations. A cell that does not
// type-check, or gives a type other than the one its typed `let` or function declares, fails
// the build; a cell that gives the wrong value (`then` not adopting the promise, a `done`
// closure not run) fails its expectation. In the `done` rows, `log` records every run of the
// closures: one per position.

/// Adds one, or throws for a negative number: the throwing step of the matrix.
@Sendable private func incremented(_ x: Int) throws -> Int {
  guard x >= 0 else { throw CoreTestError.second }
  return x + 1
}

/// The queue every matrix step runs on: each cell names it with `on:`.
private let matrixQueue = DispatchQueue(label: "closure-shape-matrix")

@Suite(
  "Closure shapes × positions: each verb takes its closure shape without annotations and gives the right type",
  .timeLimit(.minutes(1)))
struct ClosureShapeMatrixTests {
  @Test("map: a closure returning a value, one expression, in every position")
  func mapOneExpression() async throws {
    let source = Promise(1)
    let described = source.map(on: matrixQueue) { x in x + 1 }
      .map { v in "\(v)" }
    #expect(try await described.value == "2")  // followed by map
    let caught = source.map(on: matrixQueue) { x in x + 1 }
      .catch { _ in }
    #expect(try await caught.value == 2)  // followed by catch
    let cleaned = source.map(on: matrixQueue) { x in x + 1 }
      .always {}
    #expect(try await cleaned.value == 2)  // followed by always
    #expect(try await source.map(on: matrixQueue) { x in x + 1 }.value == 2)  // followed by value
    func step() -> Promise<Int> {
      source.map(on: matrixQueue) { x in x + 1 }
    }
    #expect(try await step().value == 2)  // returned from a function
    let typed: Promise<Int> = source.map(on: matrixQueue) { x in x + 1 }
    #expect(try await typed.value == 2)  // a typed let
    let untyped = source.map(on: matrixQueue) { x in x + 1 }
    #expect(try await untyped.value == 2)  // an untyped let
  }

  @Test("map: a closure returning a value, several statements, in every position")
  func mapStatements() async throws {
    let source = Promise(1)
    let described = source.map(on: matrixQueue) { x in
      let y = x + 1
      return y
    }
    .map { v in "\(v)" }
    #expect(try await described.value == "2")  // followed by map
    let caught = source.map(on: matrixQueue) { x in
      let y = x + 1
      return y
    }
    .catch { _ in }
    #expect(try await caught.value == 2)  // followed by catch
    let cleaned = source.map(on: matrixQueue) { x in
      let y = x + 1
      return y
    }
    .always {}
    #expect(try await cleaned.value == 2)  // followed by always
    #expect(
      try await source.map(on: matrixQueue) { x in
        let y = x + 1
        return y
      }.value == 2)  // followed by value
    func step() -> Promise<Int> {
      source.map(on: matrixQueue) { x in
        let y = x + 1
        return y
      }
    }
    #expect(try await step().value == 2)  // returned from a function
    let typed: Promise<Int> = source.map(on: matrixQueue) { x in
      let y = x + 1
      return y
    }
    #expect(try await typed.value == 2)  // a typed let
    let untyped = source.map(on: matrixQueue) { x in
      let y = x + 1
      return y
    }
    #expect(try await untyped.value == 2)  // an untyped let
  }

  @Test("map: a closure returning a value, one throwing expression, in every position")
  func mapThrowingExpression() async throws {
    let source = Promise(1)
    let described = source.map(on: matrixQueue) { x in try incremented(x) }
      .map { v in "\(v)" }
    #expect(try await described.value == "2")  // followed by map
    let caught = source.map(on: matrixQueue) { x in try incremented(x) }
      .catch { _ in }
    #expect(try await caught.value == 2)  // followed by catch
    let cleaned = source.map(on: matrixQueue) { x in try incremented(x) }
      .always {}
    #expect(try await cleaned.value == 2)  // followed by always
    // followed by value
    #expect(try await source.map(on: matrixQueue) { x in try incremented(x) }.value == 2)
    func step() -> Promise<Int> {
      source.map(on: matrixQueue) { x in try incremented(x) }
    }
    #expect(try await step().value == 2)  // returned from a function
    let typed: Promise<Int> = source.map(on: matrixQueue) { x in try incremented(x) }
    #expect(try await typed.value == 2)  // a typed let
    let untyped = source.map(on: matrixQueue) { x in try incremented(x) }
    #expect(try await untyped.value == 2)  // an untyped let
  }

  @Test("map: a closure returning a value, several statements that may throw, in every position")
  func mapThrowingStatements() async throws {
    let source = Promise(1)
    let described = source.map(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return x + 1
    }
    .map { v in "\(v)" }
    #expect(try await described.value == "2")  // followed by map
    let caught = source.map(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return x + 1
    }
    .catch { _ in }
    #expect(try await caught.value == 2)  // followed by catch
    let cleaned = source.map(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return x + 1
    }
    .always {}
    #expect(try await cleaned.value == 2)  // followed by always
    #expect(
      try await source.map(on: matrixQueue) { x in
        guard x > 0 else { throw CoreTestError.first }
        return x + 1
      }.value == 2)  // followed by value
    func step() -> Promise<Int> {
      source.map(on: matrixQueue) { x in
        guard x > 0 else { throw CoreTestError.first }
        return x + 1
      }
    }
    #expect(try await step().value == 2)  // returned from a function
    let typed: Promise<Int> = source.map(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return x + 1
    }
    #expect(try await typed.value == 2)  // a typed let
    let untyped = source.map(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return x + 1
    }
    #expect(try await untyped.value == 2)  // an untyped let
  }

  @Test("done: a closure returning nothing, one expression, in every position")
  func doneOneExpression() async throws {
    let source = Promise(1)
    let log = Guarded<[Int]>([])
    let described = source.done(on: matrixQueue) { x in log.append(x) }
      .map { _ in "next" }
    #expect(try await described.value == "next")  // followed by map
    let caught = source.done(on: matrixQueue) { x in log.append(x) }
      .catch { _ in }
    try await caught.value  // followed by catch
    let cleaned = source.done(on: matrixQueue) { x in log.append(x) }
      .always {}
    try await cleaned.value  // followed by always
    try await source.done(on: matrixQueue) { x in log.append(x) }.value  // followed by value
    func step() -> Promise<Void> {
      source.done(on: matrixQueue) { x in log.append(x) }
    }
    try await step().value  // returned from a function
    let typed: Promise<Void> = source.done(on: matrixQueue) { x in log.append(x) }
    try await typed.value  // a typed let
    let untyped = source.done(on: matrixQueue) { x in log.append(x) }
    try await untyped.value  // an untyped let
    #expect(log.value == Array(repeating: 1, count: 7))
  }

  @Test("done: a closure returning nothing, several statements, in every position")
  func doneStatements() async throws {
    let source = Promise(1)
    let log = Guarded<[Int]>([])
    let described = source.done(on: matrixQueue) { x in
      log.append(x)
      log.append(x + 1)
    }
    .map { _ in "next" }
    #expect(try await described.value == "next")  // followed by map
    let caught = source.done(on: matrixQueue) { x in
      log.append(x)
      log.append(x + 1)
    }
    .catch { _ in }
    try await caught.value  // followed by catch
    let cleaned = source.done(on: matrixQueue) { x in
      log.append(x)
      log.append(x + 1)
    }
    .always {}
    try await cleaned.value  // followed by always
    try await source.done(on: matrixQueue) { x in
      log.append(x)
      log.append(x + 1)
    }.value  // followed by value
    func step() -> Promise<Void> {
      source.done(on: matrixQueue) { x in
        log.append(x)
        log.append(x + 1)
      }
    }
    try await step().value  // returned from a function
    let typed: Promise<Void> = source.done(on: matrixQueue) { x in
      log.append(x)
      log.append(x + 1)
    }
    try await typed.value  // a typed let
    let untyped = source.done(on: matrixQueue) { x in
      log.append(x)
      log.append(x + 1)
    }
    try await untyped.value  // an untyped let
    #expect(log.value == Array(repeating: [1, 2], count: 7).flatMap { $0 })
  }

  @Test("done: a closure returning nothing, an if statement, in every position")
  func doneControlFlow() async throws {
    let source = Promise(1)
    let log = Guarded<[Int]>([])
    let described = source.done(on: matrixQueue) { x in
      if x > 0 { log.append(x) }
      log.append(x + 1)
    }
    .map { _ in "next" }
    #expect(try await described.value == "next")  // followed by map
    let caught = source.done(on: matrixQueue) { x in
      if x > 0 { log.append(x) }
      log.append(x + 1)
    }
    .catch { _ in }
    try await caught.value  // followed by catch
    let cleaned = source.done(on: matrixQueue) { x in
      if x > 0 { log.append(x) }
      log.append(x + 1)
    }
    .always {}
    try await cleaned.value  // followed by always
    try await source.done(on: matrixQueue) { x in
      if x > 0 { log.append(x) }
      log.append(x + 1)
    }.value  // followed by value
    func step() -> Promise<Void> {
      source.done(on: matrixQueue) { x in
        if x > 0 { log.append(x) }
        log.append(x + 1)
      }
    }
    try await step().value  // returned from a function
    let typed: Promise<Void> = source.done(on: matrixQueue) { x in
      if x > 0 { log.append(x) }
      log.append(x + 1)
    }
    try await typed.value  // a typed let
    let untyped = source.done(on: matrixQueue) { x in
      if x > 0 { log.append(x) }
      log.append(x + 1)
    }
    try await untyped.value  // an untyped let
    #expect(log.value == Array(repeating: [1, 2], count: 7).flatMap { $0 })
  }

  @Test("done: a closure returning nothing, several statements that may throw, in every position")
  func doneThrowingStatements() async throws {
    let source = Promise(1)
    let log = Guarded<[Int]>([])
    let described = source.done(on: matrixQueue) { x in
      try log.append(incremented(x) - 1)
      log.append(x + 1)
    }
    .map { _ in "next" }
    #expect(try await described.value == "next")  // followed by map
    let caught = source.done(on: matrixQueue) { x in
      try log.append(incremented(x) - 1)
      log.append(x + 1)
    }
    .catch { _ in }
    try await caught.value  // followed by catch
    let cleaned = source.done(on: matrixQueue) { x in
      try log.append(incremented(x) - 1)
      log.append(x + 1)
    }
    .always {}
    try await cleaned.value  // followed by always
    try await source.done(on: matrixQueue) { x in
      try log.append(incremented(x) - 1)
      log.append(x + 1)
    }.value  // followed by value
    func step() -> Promise<Void> {
      source.done(on: matrixQueue) { x in
        try log.append(incremented(x) - 1)
        log.append(x + 1)
      }
    }
    try await step().value  // returned from a function
    let typed: Promise<Void> = source.done(on: matrixQueue) { x in
      try log.append(incremented(x) - 1)
      log.append(x + 1)
    }
    try await typed.value  // a typed let
    let untyped = source.done(on: matrixQueue) { x in
      try log.append(incremented(x) - 1)
      log.append(x + 1)
    }
    try await untyped.value  // an untyped let
    #expect(log.value == Array(repeating: [1, 2], count: 7).flatMap { $0 })
  }

  @Test("done: a closure returning nothing, an empty body, in every position")
  func doneEmptyBody() async throws {
    let source = Promise(1)
    let log = Guarded<[Int]>([])
    let described = source.done(on: matrixQueue) { _ in }
      .map { _ in "next" }
    #expect(try await described.value == "next")  // followed by map
    let caught = source.done(on: matrixQueue) { _ in }
      .catch { _ in }
    try await caught.value  // followed by catch
    let cleaned = source.done(on: matrixQueue) { _ in }
      .always {}
    try await cleaned.value  // followed by always
    try await source.done(on: matrixQueue) { _ in }.value  // followed by value
    func step() -> Promise<Void> {
      source.done(on: matrixQueue) { _ in }
    }
    try await step().value  // returned from a function
    let typed: Promise<Void> = source.done(on: matrixQueue) { _ in }
    try await typed.value  // a typed let
    let untyped = source.done(on: matrixQueue) { _ in }
    try await untyped.value  // an untyped let
    #expect(log.value.isEmpty)
  }

  @Test("then: a closure returning a promise, one expression, in every position")
  func thenOneExpression() async throws {
    let source = Promise(1)
    let described = source.then(on: matrixQueue) { x in Promise(x + 1) }
      .map { v in "\(v)" }
    #expect(try await described.value == "2")  // followed by map
    let caught = source.then(on: matrixQueue) { x in Promise(x + 1) }
      .catch { _ in }
    #expect(try await caught.value == 2)  // followed by catch
    let cleaned = source.then(on: matrixQueue) { x in Promise(x + 1) }
      .always {}
    #expect(try await cleaned.value == 2)  // followed by always
    #expect(try await source.then(on: matrixQueue) { x in Promise(x + 1) }.value == 2)  // followed by value
    func step() -> Promise<Int> {
      source.then(on: matrixQueue) { x in Promise(x + 1) }
    }
    #expect(try await step().value == 2)  // returned from a function
    let typed: Promise<Int> = source.then(on: matrixQueue) { x in Promise(x + 1) }
    #expect(try await typed.value == 2)  // a typed let
    let untyped = source.then(on: matrixQueue) { x in Promise(x + 1) }
    #expect(try await untyped.value == 2)  // an untyped let
  }

  @Test("then: a closure returning a promise, several statements, in every position")
  func thenStatements() async throws {
    let source = Promise(1)
    let described = source.then(on: matrixQueue) { x in
      let y = x + 1
      return Promise(y)
    }
    .map { v in "\(v)" }
    #expect(try await described.value == "2")  // followed by map
    let caught = source.then(on: matrixQueue) { x in
      let y = x + 1
      return Promise(y)
    }
    .catch { _ in }
    #expect(try await caught.value == 2)  // followed by catch
    let cleaned = source.then(on: matrixQueue) { x in
      let y = x + 1
      return Promise(y)
    }
    .always {}
    #expect(try await cleaned.value == 2)  // followed by always
    #expect(
      try await source.then(on: matrixQueue) { x in
        let y = x + 1
        return Promise(y)
      }.value == 2)  // followed by value
    func step() -> Promise<Int> {
      source.then(on: matrixQueue) { x in
        let y = x + 1
        return Promise(y)
      }
    }
    #expect(try await step().value == 2)  // returned from a function
    let typed: Promise<Int> = source.then(on: matrixQueue) { x in
      let y = x + 1
      return Promise(y)
    }
    #expect(try await typed.value == 2)  // a typed let
    let untyped = source.then(on: matrixQueue) { x in
      let y = x + 1
      return Promise(y)
    }
    #expect(try await untyped.value == 2)  // an untyped let
  }

  @Test("then: a closure returning a promise, several statements that may throw, in every position")
  func thenThrowingStatements() async throws {
    let source = Promise(1)
    let described = source.then(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return Promise(x + 1)
    }
    .map { v in "\(v)" }
    #expect(try await described.value == "2")  // followed by map
    let caught = source.then(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return Promise(x + 1)
    }
    .catch { _ in }
    #expect(try await caught.value == 2)  // followed by catch
    let cleaned = source.then(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return Promise(x + 1)
    }
    .always {}
    #expect(try await cleaned.value == 2)  // followed by always
    #expect(
      try await source.then(on: matrixQueue) { x in
        guard x > 0 else { throw CoreTestError.first }
        return Promise(x + 1)
      }.value == 2)  // followed by value
    func step() -> Promise<Int> {
      source.then(on: matrixQueue) { x in
        guard x > 0 else { throw CoreTestError.first }
        return Promise(x + 1)
      }
    }
    #expect(try await step().value == 2)  // returned from a function
    let typed: Promise<Int> = source.then(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return Promise(x + 1)
    }
    #expect(try await typed.value == 2)  // a typed let
    let untyped = source.then(on: matrixQueue) { x in
      guard x > 0 else { throw CoreTestError.first }
      return Promise(x + 1)
    }
    #expect(try await untyped.value == 2)  // an untyped let
  }

  // MARK: recover: the same shapes, where `Value` is fixed by the promise

  @Test("recover on a Promise<Void> takes a closure of several statements returning nothing")
  func recoverVoidStatements() async throws {
    let log = Guarded<[Int]>([])
    let failed = Promise<Void>(error: CoreTestError.first)
    let typed: Promise<Void> = failed.recover(on: matrixQueue) { _ in
      log.append(1)
      log.append(2)
    }
    try await typed.value  // a typed let
    let untyped = failed.recover(on: matrixQueue) { _ in
      log.append(1)
      log.append(2)
    }
    try await untyped.value  // an untyped let
    func step() -> Promise<Void> {
      failed.recover(on: matrixQueue) { _ in
        log.append(1)
        log.append(2)
      }
    }
    try await step().value  // returned from a function
    #expect(log.value == [1, 2, 1, 2, 1, 2])
  }

  @Test("recover on a Promise<Void> adopts a promise its closure returns")
  func recoverVoidAdoptsAPromise() async throws {
    let failed = Promise<Void>(error: CoreTestError.first)
    let fallback = Promise<Void>(error: CoreTestError.second)
    // Were the closure taken as returning `Void` (its promise dropped), these would succeed.
    let single = failed.recover(on: matrixQueue) { _ in fallback }
    await #expect(throws: CoreTestError.second) { try await single.value }
    let several = failed.recover(on: matrixQueue) { _ in
      let next = fallback
      return next
    }
    await #expect(throws: CoreTestError.second) { try await several.value }
  }

  @Test("recover takes a value, a promise, or a throw, in one or several statements")
  func recoverValueShapes() async throws {
    let failed = Promise<Int>(error: CoreTestError.first)
    #expect(try await failed.recover(on: matrixQueue) { _ in 5 }.value == 5)
    #expect(try await failed.recover(on: matrixQueue) { _ in Promise(5) }.value == 5)
    let several = failed.recover(on: matrixQueue) { error in
      guard error is CoreTestError else { throw error }
      return 5
    }
    #expect(try await several.value == 5)
    let severalPromise = failed.recover(on: matrixQueue) { error in
      guard error is CoreTestError else { throw error }
      return Promise(5)
    }
    #expect(try await severalPromise.value == 5)
    let rethrown = failed.recover(on: matrixQueue) { error in throw error }
    await #expect(throws: CoreTestError.first) { try await rethrown.value }
  }

  // MARK: map, get, tap, compactMap, and the static fan-out `Promise.map`

  @Test("instance map transforms the value in every position, next to the static fan-out")
  func mapInEveryPosition() async throws {
    let source = Promise(1)
    #expect(try await source.map(on: matrixQueue) { x in x + 1 }.map { v in "\(v)" }.value == "2")
    #expect(try await source.map(on: matrixQueue) { $0 + 1 }.catch { _ in }.value == 2)
    let several = source.map(on: matrixQueue) { x in
      let y = x + 1
      return y
    }
    #expect(try await several.always {}.value == 2)
    func step() -> Promise<String> {
      source.map(on: matrixQueue) { x in
        let text = "\(x + 1)"
        return text
      }
    }
    #expect(try await step().value == "2")
    let typed: Promise<Int> = source.map(on: matrixQueue) { x in try incremented(x) }
    #expect(try await typed.value == 2)
    // The static fan-out is still reached through the type, with or without its generic argument.
    let fannedOut = Promise.map([1, 2, 3], maxConcurrent: 2) { x in Promise(x * 10) }
    #expect(try await fannedOut.value == [10, 20, 30])
    let spelledOut = Promise<String>.map(on: matrixQueue, [1, 2], maxConcurrent: 1) { x in Promise("\(x)") }
    #expect(try await spelledOut.value == ["1", "2"])
  }

  @Test("get, tap and compactMap take one or several statements in every position")
  func sideEffectsInEveryPosition() async throws {
    let source = Promise(1)
    let log = Guarded<[Int]>([])
    let got = source.get(on: matrixQueue) { x in
      log.append(x)
      log.append(x + 1)
    }
    #expect(try await got.map { v in v * 10 }.value == 10)
    let tapped: Promise<Int> = source.tap(on: matrixQueue) { result in
      if case .success(let x) = result { log.append(x) }
    }
    #expect(try await tapped.value == 1)
    func firstEven() -> Promise<Int> {
      Promise([1, 2, 3]).compactMap(on: matrixQueue) { numbers in
        let even = numbers.first { $0 % 2 == 0 }
        return even
      }
    }
    #expect(try await firstEven().value == 2)
    #expect(try await source.compactMap(on: matrixQueue) { x in Int("\(x)7") }.value == 17)
    #expect(log.value == [1, 2, 1])
  }
}
