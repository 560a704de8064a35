import Dispatch
import Testing

@testable import Promises

/// Rule 7: nothing is retained after settlement: callbacks and captured objects are released
/// once they have run, and the links of a settled chain are freed.
///
/// Objects are created inside non-inlined helpers, so no local variable of a test keeps them
/// alive (a debug build keeps locals to the end of their scope). Where a test checks that
/// promises themselves are freed, it first waits for the queue that ran the callbacks to finish
/// its block (`drainQueue`): the running block holds the nodes it is running until it returns.
@Suite("Rule 7: nothing is retained after settlement", .timeLimit(.minutes(1)))
struct LeakTests {
  // MARK: Helpers that create the tracked objects

  /// Chains one callback of each kind on `source`, each capturing its own tracked object.
  @inline(never)
  private func observeCapturing(
    _ source: Promise<Int>, on queue: DispatchQueue
  ) -> (links: [Promise<Int>], tokens: [WeakObserver<LifetimeToken>]) {
    let tokens = (0..<8).map { LifetimeToken("callback \($0)") }
    let links: [Promise<Int>] = [
      source.map(on: queue) { value -> Int in
        _ = tokens[0]
        return value
      },
      source.then(on: queue) { value -> Promise<Int> in
        _ = tokens[1]
        return Promise(value)
      },
      source.recover(on: queue) { _ -> Int in
        _ = tokens[2]
        return 0
      },
      source.recover(on: queue) { _ -> Promise<Int> in
        _ = tokens[3]
        return Promise(0)
      },
      source.catch(on: queue) { _ in _ = tokens[4] }.recover { _ in 0 },
      source.always(on: queue) { _ = tokens[5] }.recover { _ in 0 },
      source.whenSettled(on: queue) { _ in _ = tokens[6] }.recover { _ in 0 },
      source.validate(on: queue) { _ in
        _ = tokens[7]
        return true
      }.recover { _ in 0 },
    ]
    return (links, tokens.map { WeakObserver($0) })
  }

  /// A chain of `length` links on `queue` from `head`; weak references to every link.
  @inline(never)
  private func chain(
    from head: Promise<Int>, length: Int, on queue: DispatchQueue
  ) -> (tail: Guarded<Promise<Int>?>, links: [WeakObserver<Promise<Int>>]) {
    var links: [WeakObserver<Promise<Int>>] = []
    var tail = head
    for index in 0..<length {
      switch index % 4 {
      case 0: tail = tail.map(on: queue) { $0 + 1 }
      case 1: tail = tail.then(on: queue) { value in Promise(value + 1) }
      case 2: tail = tail.always(on: queue) {}
      default: tail = tail.recover(on: queue) { _ in 0 }
      }
      links.append(WeakObserver(tail))
    }
    return (Guarded(tail), links)
  }

  // MARK: Captured objects

  @Test(arguments: [true, false])
  func objectsCapturedByCallbacksAreReleasedOnceTheCallbacksHaveRun(fulfil: Bool) async throws {
    let queue = DispatchQueue(label: "tests.leak.callbacks")
    let (source, resolver) = Promise<Int>.pending()
    let (links, tokens) = observeCapturing(source, on: queue)
    #expect(tokens.allSatisfy { !$0.isNil }, "pending callbacks keep their captures")
    if fulfil {
      resolver.fulfill(1)
    } else {
      resolver.reject(CoreTestError.first)
    }
    // allSettled, not all: `all` would stop at the first rejection.
    _ = await settledOutcome(of: Promise.allSettled(links))
    for (index, token) in tokens.enumerated() {
      #expect(token.isNil, "callback \(index) still holds what it captured after settlement")
    }
    // The links themselves are still alive (held by `links`): only the callbacks were released.
    #expect(links.allSatisfy { !$0.isPending })
  }

  @Test func anObjectCapturedByACallbackOnASettledPromiseIsReleasedAfterItRuns() async throws {
    @inline(never) func make() -> (Promise<Int>, WeakObserver<LifetimeToken>) {
      let token = LifetimeToken()
      return (
        Promise(1).map { value -> Int in
          _ = token
          return value
        }, WeakObserver(token)
      )
    }
    let (link, token) = make()
    #expect(try await link.value == 1)
    #expect(token.isNil)
  }

  @Test func anObjectCapturedByAThrowingCallbackIsReleased() async {
    @inline(never) func make() -> (Promise<Int>, WeakObserver<LifetimeToken>) {
      let token = LifetimeToken()
      return (
        Promise(1).map { _ -> Int in
          _ = token
          throw CoreTestError.first
        }, WeakObserver(token)
      )
    }
    let (link, token) = make()
    _ = await settledOutcome(of: link)
    #expect(token.isNil)
  }

  @Test func theValueOfASettledPromiseIsReleasedWithThePromise() async throws {
    @inline(never) func make() -> (Guarded<Promise<LifetimeToken>?>, WeakObserver<LifetimeToken>) {
      let token = LifetimeToken()
      let promise = Promise(1).map { _ in token }
      return (Guarded(promise), WeakObserver(token))
    }
    let (box, token) = make()
    _ = try await box.value!.value
    await drainQueue(.promises)
    #expect(!token.isNil, "a fulfilled promise keeps its value")
    box.value = nil
    #expect(token.isNil)
  }

  // MARK: Links of a chain

  @Test(arguments: CallbackQueueKind.allCases)
  func theLinksOfASettledChainAreFreedOnceTheTailIsReleased(kind: CallbackQueueKind) async throws {
    let queue = kind.makeQueue()
    let (head, resolver) = Promise<Int>.pending()
    let (tail, links) = chain(from: head, length: 40, on: queue)
    #expect(links.allSatisfy { !$0.isNil }, "a pending chain is kept alive by its head")
    resolver.fulfill(0)
    _ = try await tail.value!.value
    await drainQueue(queue)
    await drainQueue(.promises)
    for (index, link) in links.dropLast().enumerated() {
      #expect(link.isNil, "link \(index) of a settled chain is still alive")
    }
    tail.value = nil
    #expect(links.last!.isNil, "the tail is freed when released")
  }

  @Test func aSettledLinkIsFreedEvenWhileItsSourceIsKept() async throws {
    let source = Promise(1)
    @inline(never) func make() -> (
      Guarded<Promise<Int>?>, WeakObserver<Promise<Int>>, WeakObserver<Promise<Int>>
    ) {
      let middle = source.map { $0 + 1 }
      let tail = middle.map { $0 + 1 }
      return (Guarded(tail), WeakObserver(middle), WeakObserver(tail))
    }
    let (tail, middle, tailObserver) = make()
    #expect(try await tail.value!.value == 3)
    await drainQueue(.promises)
    #expect(middle.isNil)
    tail.value = nil
    #expect(tailObserver.isNil)
    _ = source
  }

  @Test func anAdoptedPromiseIsReleasedAfterTheAdopterSettles() async throws {
    let (inner, innerResolver) = Promise<Int>.pending()
    @inline(never) func make() -> (Promise<Int>, WeakObserver<Promise<Int>>) {
      let adopted = inner.map { $0 * 2 }
      let outer = Promise(1).then { _ in adopted }
      return (outer, WeakObserver(adopted))
    }
    let (outer, adopted) = make()
    await yieldUntil { !adopted.isNil && callbacksWaiting(on: adopted.object!) == 1 }
    innerResolver.fulfill(4)
    #expect(try await outer.value == 8)
    await drainQueue(.promises)
    #expect(adopted.isNil)
  }

  @Test func theInputsOfAllAreReleasedOnceItSettles() async throws {
    @inline(never) func make() -> (Promise<[Int]>, [WeakObserver<Promise<Int>>], [Promise<Int>.Resolver]) {
      let pairs = (0..<5).map { _ in Promise<Int>.pending() }
      let inputs = pairs.map { pair in pair.promise.map { $0 } }
      return (Promise.all(inputs), inputs.map { WeakObserver($0) }, pairs.map { $0.resolver })
    }
    let (all, inputs, resolvers) = make()
    for (index, resolver) in resolvers.enumerated() { resolver.fulfill(index) }
    #expect(try await all.value == [0, 1, 2, 3, 4])
    await drainQueue(.promises)
    for (index, input) in inputs.enumerated() {
      #expect(input.isNil, "input \(index) is still retained by the settled aggregate")
    }
  }

  // MARK: Cancellation handlers and tasks

  @Test func cancellationHandlersAreReleasedWhenThePromiseSettlesNormally() async throws {
    let (promise, resolver) = Promise<Int>.pending()
    @inline(never) func register() -> WeakObserver<LifetimeToken> {
      let token = LifetimeToken()
      resolver.onCancel { _ = token }
      return WeakObserver(token)
    }
    let token = register()
    #expect(!token.isNil)
    resolver.fulfill(1)
    #expect(token.isNil)
    #expect(try await promise.value == 1)
  }

  @Test func cancellationHandlersAreReleasedAfterTheyRan() async {
    let (promise, resolver) = Promise<Int>.pending()
    @inline(never) func register() -> WeakObserver<LifetimeToken> {
      let token = LifetimeToken()
      resolver.onCancel { _ = token }
      return WeakObserver(token)
    }
    let token = register()
    promise.cancel()
    #expect(token.isNil)
  }

  @Test func theBodyOfAnAsyncPromiseIsReleasedAfterItReturns() async throws {
    @inline(never) func make() -> (Promise<Int>, WeakObserver<LifetimeToken>) {
      let token = LifetimeToken()
      return (
        Promise<Int> { () async throws -> Int in
          _ = token
          return 5
        }, WeakObserver(token)
      )
    }
    let (promise, token) = make()
    #expect(try await promise.value == 5)
    // The task that ran the body finishes right after fulfilling; wait for it to let go.
    await yieldUntil { token.isNil }
    #expect(token.isNil)
  }

  @Test func aCancelledLinkReleasesItsCallbackAtOnceEvenWhileItsSourceIsPending() async {
    // The source stays pending (another observer keeps it from being cancelled); the cancelled
    // link is settled, so rule 7 says its callback and captures must go now, not whenever the
    // source eventually settles.
    let (source, resolver) = Promise<Int>.pending()
    let other = source.map { $0 }
    @inline(never) func make() -> (Promise<Int>, WeakObserver<LifetimeToken>) {
      let token = LifetimeToken()
      return (
        source.map { value -> Int in
          _ = token
          return value
        }, WeakObserver(token)
      )
    }
    let (link, token) = make()
    link.cancel()
    #expect(link.isRejected)
    #expect(source.isPending, "the source has another observer, so it is not cancelled")
    #expect(token.isNil, "the cancelled link still holds its callback's captures")
    resolver.fulfill(1)
    _ = await settledOutcome(of: other)
  }

  @Test func aPendingPromiseThatGoesAwayReleasesTheCallbacksWaitingOnIt() {
    // The callback list owns a reference to each waiting node. An internal promise with no
    // resolver can go away while still pending (nothing will ever settle it); its nodes must go
    // with it. (A node that holds its source, like a `then` link, keeps it alive instead.)
    @inline(never) func make() -> (WeakObserver<Promise<Int>>, [WeakObserver<SignalNode>]) {
      let promise = Promise<Int>(queue: nil, file: #fileID, line: #line)
      let nodes = (0..<3).map { _ in SignalNode() }
      for node in nodes { promise.register(node) }
      #expect(promise.state.waitingCount == 3)
      return (WeakObserver(promise), nodes.map { WeakObserver($0) })
    }
    let (promise, nodes) = make()
    #expect(promise.isNil)
    #expect(nodes.allSatisfy { $0.isNil }, "a waiting node outlived the promise it waited on")
  }

  @Test func aLinkCancelledAfterItsSourceFiredItLetsGoWhenItsTurnComes() async {
    // The source has settled and placed the link in its queue's outbox (the queue is busy), so
    // a firing may begin at any moment: the cancellation leaves the closure and the source to
    // it (Docs/Design.md, I3). The firing finds the link settled, skips the body and lets go
    // of both.
    let queue = DispatchQueue(label: "tests.leak.cancel-placed")
    let gate = DispatchSemaphore(value: 0)
    queue.async { _ = gate.wait(timeout: .now() + 10) }
    let runs = Guarded(0)
    @inline(never) func make() -> (Promise<Int>, WeakObserver<LifetimeToken>, WeakObserver<Promise<Int>>) {
      let (source, resolver) = Promise<Int>.pending()
      let (link, capture) = countingLink(on: source, queue: queue, runs: runs)
      resolver.fulfill(1)
      return (link, capture, WeakObserver(source))
    }
    let (link, token, source) = make()
    link.cancel()
    #expect(link.isCancelled)
    #expect(!token.isNil && !source.isNil, "the link waits in the outbox: its firing lets go")
    gate.signal()
    await drainQueue(queue)
    #expect(runs.value == 0, "a cancelled link ran its body")
    #expect(token.isNil, "the cancelled link still holds its callback's captures")
    #expect(source.isNil, "the cancelled link still holds its source")
  }

  @Test func aLinkCancelledWhileItsBodyRunsLetsGoOfItsSource() async {
    // Once a drain fires a link it found not settled, a cancellation leaves the link's source
    // to that drain; the body's outcome is then ignored, and the drain must still release the
    // source.
    let queue = DispatchQueue(label: "tests.leak.cancel-in-body")
    @inline(never) func make() -> (Promise<Int>, WeakObserver<Promise<Int>>) {
      let (source, resolver) = Promise<Int>.pending()
      let link = Guarded<Promise<Int>?>(nil)
      let created = source.map(on: queue) { value -> Int in
        link.value?.cancel()
        return value + 1
      }
      link.value = created
      resolver.fulfill(1)
      return (created, WeakObserver(source))
    }
    let (link, source) = make()
    let outcome = await settledOutcome(of: link)
    #expect(throws: CancellationError.self) { try outcome.get() }
    await drainQueue(queue)
    #expect(source.isNil, "the cancelled link still holds its source")
  }
}
