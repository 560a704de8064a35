import Dispatch
import Foundation
import Promises
import Testing

private typealias Kit = CombinatorTestKit

/// A pending promise whose cancellation handler is counted.
private func cancellableInput() -> (Promise<Int>, Promise<Int>.Resolver, Kit.Locked<Int>) {
  let cancellations = Kit.Locked(0)
  let (promise, resolver) = Promise<Int>.pending()
  resolver.onCancel { cancellations.withValue { $0 += 1 } }
  return (promise, resolver, cancellations)
}

@Suite("Promise.race", .timeLimit(.minutes(1)))
struct PromiseRaceTests {
  @Test("the first input to be fulfilled wins")
  func firstFulfilledWins() async throws {
    let (a, resolveA) = Promise<Int>.pending()
    let (b, resolveB) = Promise<Int>.pending()
    let race = Promise.race([a, b])
    resolveB.fulfill(2)
    resolveA.fulfill(1)
    #expect(try await race.value == 2)
  }

  @Test("the first input to be rejected wins too")
  func firstRejectedWins() async throws {
    let (a, resolveA) = Promise<Int>.pending()
    let (b, resolveB) = Promise<Int>.pending()
    let race = Promise.race([a, b])
    resolveA.reject(Kit.Failure(1))
    resolveB.fulfill(2)
    await #expect(throws: Kit.Failure(1)) { try await race.value }
  }

  @Test("among inputs settled already, the first in array order wins")
  func settledInputsInArrayOrder() async throws {
    let race = Promise.race([Promise(1), Promise(error: Kit.Failure(2)), Promise(3)])
    #expect(try await race.value == 1)
  }

  @Test("an empty race is rejected with emptyRace")
  func emptyRace() async {
    let race = Promise<Int>.race([])
    await #expect(throws: PromiseError.emptyRace(createdAt: race.creationSite)) { try await race.value }
  }

  @Test("callbacks on the race run on their own queue")
  func callbacksOnTheirQueue() async throws {
    let queue = DispatchQueue(label: "race.callback")
    let race = Promise.race([Promise(1), Promise(2)]).map(on: queue) { value -> Int in
      dispatchPrecondition(condition: .onQueue(queue))
      return value
    }
    #expect(try await race.value == 1)
  }

  @Test("the losers keep running after the race is decided")
  func losersKeepRunning() async throws {
    let (a, resolveA, cancelledA) = cancellableInput()
    let race = Promise.race([a, Promise(9)])
    #expect(try await race.value == 9)
    #expect(a.isPending)
    #expect(cancelledA.value == 0)
    resolveA.fulfill(1)
  }

  @Test("cancelling the race cancels the inputs nobody else waits on")
  func cancellingCancelsSoleObservedInputs() async throws {
    let (a, resolveA, cancelledA) = cancellableInput()
    let (b, resolveB, cancelledB) = cancellableInput()
    let otherObserver = b.map { $0 }
    let race = Promise.race([a, b])
    race.cancel()
    await #expect(throws: CancellationError.self) { try await race.value }
    #expect(cancelledA.value == 1)
    #expect(cancelledB.value == 0)
    #expect(b.isPending)
    resolveB.fulfill(2)
    #expect(try await otherObserver.value == 2)
    withExtendedLifetime(resolveA) {}
  }

  @Test("once the race is decided, a loser is cancelled when its other observers are")
  func decidedRaceNoLongerObservesLosers() async throws {
    let (loser, resolver, cancelled) = cancellableInput()
    let other = loser.map { $0 }
    let race = Promise.race([loser, Promise(1)])
    #expect(try await race.value == 1)
    #expect(cancelled.value == 0)
    other.cancel()
    #expect(cancelled.value == 1)
    withExtendedLifetime(resolver) {}
  }

  @Test("a pending loser does not keep the settled race alive")
  func nothingRetainedByLosers() async throws {
    let (loser, resolveLoser) = Promise<Kit.Canary>.pending()
    let weakValue: Kit.Weak
    var race: Promise<Kit.Canary>?
    do {
      let canary = Kit.Canary()
      weakValue = Kit.Weak(canary)
      race = Promise.race([loser, Promise(canary)])
    }
    let weakRace = Kit.Weak(race)
    #expect(try await race!.value.name == "canary")
    race = nil
    #expect(await Kit.eventually { weakRace.isReleased && weakValue.isReleased })
    #expect(loser.isPending)
    withExtendedLifetime(resolveLoser) {}
  }

  @Test("a race of a slow operation and a timer settles like a timeout on virtual time")
  func raceWithTimer() async throws {
    let clock = VirtualTimeScheduler()
    let (slow, resolver) = Promise<Int>.pending()
    let race = Promise.race([slow, Promise.after(.seconds(3), scheduler: clock).map { -1 }])
    clock.advance(by: .seconds(3))
    #expect(try await race.value == -1)
    withExtendedLifetime(resolver) {}
  }
}
