import Testing

@testable import Promises

/// `OnceResolver`, the "take the resolver once" box behind `race`, `any`, `timeout`, `delay`.
@Suite("OnceResolver", .timeLimit(.minutes(1)))
struct OnceResolverTests {
  @Test func onlyTheFirstOutcomeSettlesTheResult() throws {
    let (result, resolver) = Promise<Int>.pending()
    let box = OnceResolver(resolver)
    box.resolve(.success(1))
    box.resolve(.success(2))
    #expect(try result.result?.get() == 1)
    #expect(box.take() == nil)
  }

  @Test func takingTheResolverRetiresAndUnregistersTheTrackedNodes() {
    let (_, resolver) = Promise<Int>.pending()
    let box = OnceResolver(resolver, inputs: 2)
    // The resolvers are kept: dropping one settles its promise (`brokenPromise`).
    let pairs = [Promise<Int>.pending(), Promise<Int>.pending()]
    let inputs = pairs.map(\.promise)
    box.forward(from: inputs) { _, _ in }
    #expect(inputs.map { callbacksWaiting(on: $0) } == [1, 1])
    let node = box.track(ForwardingNode<Int> { _ in }, on: inputs[0])
    inputs[0].register(node)
    #expect(node.isLiveObserver)
    #expect(box.take() != nil)
    #expect(!node.isLiveObserver)
    #expect(inputs.map { callbacksWaiting(on: $0) } == [0, 0])
    #expect(pairs.allSatisfy { $0.promise.isPending })
    for pair in pairs { pair.resolver.fulfill(0) }
  }

  @Test func aNodeTrackedAfterTheBoxWasEmptiedIsRetiredAtOnce() {
    let (_, resolver) = Promise<Int>.pending()
    let box = OnceResolver(resolver)
    _ = box.take()
    let (input, inputResolver) = Promise<Int>.pending()
    let node = box.track(ForwardingNode<Int> { _ in }, on: input)
    #expect(!node.isLiveObserver)
    inputResolver.fulfill(0)
  }

  @Test func forwardingPassesEachInputsIndexAndOutcome() {
    let (_, resolver) = Promise<Int>.pending()
    let box = OnceResolver(resolver, inputs: 3)
    let pairs = (0..<3).map { _ in Promise<Int>.pending() }
    let received = Guarded<[String]>([])
    box.forward(from: pairs.map(\.promise)) { index, outcome in
      received.withLock { $0.append("\(index): \((try? outcome.get()) ?? -1)") }
    }
    // Forwarding nodes run inline, where the input settles.
    pairs[2].resolver.fulfill(20)
    pairs[0].resolver.reject(CoreTestError.first)
    #expect(received.value == ["2: 20", "0: -1"])
    // Input 1 is still pending: its resolver must outlive the check (an optimised build would
    // release it, and break the promise, right after the last use of `pairs` above).
    pairs[1].resolver.fulfill(10)
    #expect(received.value == ["2: 20", "0: -1", "1: 10"])
  }

  @Test func cancellingTheResultEmptiesTheBox() {
    let (result, resolver) = Promise<Int>.pending()
    let box = OnceResolver(resolver)
    let (input, inputResolver) = Promise<Int>.pending()
    box.forward(from: input) { _ in }
    #expect(callbacksWaiting(on: input) == 1)
    box.take(whenCancelled: result)
    result.cancel()
    #expect(box.take() == nil)
    #expect(callbacksWaiting(on: input) == 0)
    inputResolver.fulfill(0)
  }
}
