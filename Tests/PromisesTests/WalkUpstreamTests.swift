import Testing

@testable import Promises

/// `_PromiseNode.walkUpstream`: the walk behind `wait`'s deadlock check and the adoption-cycle
/// check. It follows a single chain without allocating and must end even on a loop it is not
/// looking for.
@Suite("Walking upstream", .timeLimit(.minutes(1)))
struct WalkUpstreamTests {
  /// `count` pending promises, each waiting on the next one; the last waits on `loopTo` if
  /// given. The resolvers come along so the promises stay pending.
  private func chain(
    _ count: Int, loopTo: Int? = nil
  ) -> (promises: [Promise<Int>], resolvers: [Promise<Int>.Resolver]) {
    let pending = (0..<count).map { _ in Promise<Int>.pending() }
    let promises = pending.map(\.promise)
    for index in 0..<count - 1 { promises[index].upstream = promises[index + 1] }
    if let loopTo { promises[count - 1].upstream = promises[loopTo] }
    return (promises, pending.map(\.resolver))
  }

  /// Breaks the links and settles the promises, so they go away.
  private func unlink(_ chain: (promises: [Promise<Int>], resolvers: [Promise<Int>.Resolver])) {
    for promise in chain.promises { promise.upstream = nil }
    for resolver in chain.resolvers { resolver.fulfill(0) }
  }

  @Test func aLinearWalkVisitsEveryPendingPromiseInOrder() {
    let made = chain(500)
    defer { unlink(made) }
    let promises = made.promises
    var visited: [ObjectIdentifier] = []
    let found = _PromiseNode.walkUpstream(from: promises[0]) { node, _ in
      visited.append(ObjectIdentifier(node))
      return false
    }
    #expect(!found)
    #expect(visited == promises.map { ObjectIdentifier($0) })
  }

  @Test(arguments: [(3, 0), (100, 0), (1_000, 0), (1_000, 900), (5_000, 17)])
  func aWalkEndsOnALoopAfterVisitingEveryPromiseOnIt(count: Int, loopTo: Int) {
    let made = chain(count, loopTo: loopTo)
    defer { unlink(made) }
    let promises = made.promises
    var visits = 0
    var seen = Set<ObjectIdentifier>()
    let found = _PromiseNode.walkUpstream(from: promises[0]) { node, _ in
      visits += 1
      seen.insert(ObjectIdentifier(node))
      return false
    }
    #expect(!found)
    #expect(seen.count == count, "every promise, on the loop or before it, is visited")
    // Brent's algorithm finds a loop of length λ after at most μ + 2λ steps or so.
    #expect(visits <= loopTo + 3 * (count - loopTo))
  }

  @Test func aWalkStopsAtTheFirstPromiseTheVisitorAccepts() {
    let made = chain(200, loopTo: 50)
    defer { unlink(made) }
    let promises = made.promises
    let target = ObjectIdentifier(promises[150])
    var visits = 0
    let found = _PromiseNode.walkUpstream(from: promises[0]) { node, _ in
      visits += 1
      return ObjectIdentifier(node) == target
    }
    #expect(found)
    #expect(visits == 151)
  }

  @Test func aWalkHonoursItsLimit() {
    let made = chain(300, loopTo: 0)
    defer { unlink(made) }
    let promises = made.promises
    var visits = 0
    _ = _PromiseNode.walkUpstream(from: promises[0], limit: 120) { _, _ in
      visits += 1
      return false
    }
    #expect(visits == 120)
  }
}
