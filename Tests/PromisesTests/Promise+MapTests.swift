import Dispatch
import Testing

@testable import Promises

/// `map`, `compactMap`, `get` and `tap`: the PromiseKit names.
@Suite("map, compactMap, get, tap", .timeLimit(.minutes(1)))
struct PromiseMapTests {
  @Test func mapTransformsTheValueAndPassesARejectionOn() async throws {
    #expect(try await Promise(20).map { $0 + 1 }.value == 21)
    let failed = Promise<Int>(error: CoreTestError.first).map { $0 + 1 }
    await #expect(throws: CoreTestError.first) { try await failed.value }
  }

  @Test func mapDoesNotAdoptAPromise() async throws {
    let nested = Promise(1).map { Promise($0 + 1) }
    #expect(try await nested.value.value == 2)
  }

  @Test func compactMapUnwrapsAValue() async throws {
    #expect(try await Promise("42").compactMap { Int($0) }.value == 42)
  }

  @Test func compactMapRejectsNilWithTheSiteOfTheCall() async throws {
    let line = #line + 1
    let missing = Promise("forty-two").compactMap { Int($0) }
    await #expect(
      throws: PromiseError.compactMapReturnedNil(createdAt: CreationSite(fileID: #fileID, line: line))
    ) {
      try await missing.value
    }
  }

  @Test func compactMapPassesAThrowOn() async throws {
    let thrown = Promise(1).compactMap { _ -> Int? in throw CoreTestError.second }
    await #expect(throws: CoreTestError.second) { try await thrown.value }
  }

  @Test func getSeesTheValueAndPassesItOn() async throws {
    let seen = Guarded<Int?>(nil)
    #expect(try await Promise(7).get { seen.value = $0 }.value == 7)
    #expect(seen.value == 7)
  }

  @Test func getIsSkippedOnARejectionAndAThrowRejects() async throws {
    let ran = Guarded(false)
    let skipped = Promise<Int>(error: CoreTestError.first).get { _ in ran.value = true }
    await #expect(throws: CoreTestError.first) { try await skipped.value }
    #expect(!ran.value)
    let thrown = Promise(1).get { _ in throw CoreTestError.second }
    await #expect(throws: CoreTestError.second) { try await thrown.value }
  }

  @Test func tapSeesBothOutcomesAndPassesThemOn() async throws {
    let seen = Guarded<[String]>([])
    let tapped = Promise(3).tap { result in
      if case .success(let value) = result { seen.withLock { $0.append("\(value)") } }
    }
    #expect(try await tapped.value == 3)
    let failed = Promise<Int>(error: CoreTestError.first).tap { result in
      if case .failure(let error) = result { seen.withLock { $0.append("\(error)") } }
    }
    await #expect(throws: CoreTestError.first) { try await failed.value }
    #expect(seen.value == ["3", "first"])
  }
}
