import Testing

@testable import Promises

/// `PromiseState` is a value (a non-copyable one: it owns its error): these tests drive it
/// without threads, queues or promises, the way the state machines of async-http-client are
/// tested. `#expect` cannot take a non-copyable value apart, so what it checks is read first.
@Suite("PromiseState, the state machine as a value")
struct PromiseStateTests {
  /// Nodes stand in for callbacks; the state only links them and hands them back.
  private func nodes(_ count: Int) -> [_PromiseNode] {
    (0..<count).map { _ in _PromiseNode(queue: nil) }
  }

  /// Empties `callbacks`, taking back the references the list owns.
  private func list(_ callbacks: NodeList) -> [_PromiseNode] {
    var callbacks = callbacks
    var result: [_PromiseNode] = []
    while let node = callbacks.popFirst() { result.append(node) }
    return result
  }

  @Test func aNewStateIsPendingWithNoCallbacks() {
    let state = PromiseState()
    let (pending, phase, hasCallbacks) = (state.isPending, state.phase, state.hasCallbacks)
    let (error, waiting) = (state.error, state.waitingCount)
    #expect(pending)
    #expect(phase == .pending)
    #expect(!hasCallbacks)
    #expect(error == nil)
    #expect(waiting == 0)
  }

  @Test func registeringWhilePendingStoresTheCallback() {
    var state = PromiseState()
    let callbacks = nodes(3)
    for (index, node) in callbacks.enumerated() {
      let action = state.register(node)
      let (waiting, ends) = (state.waitingCount, state.callbackEnds)
      #expect(action == .stored)
      #expect(waiting == index + 1)
      #expect(ends.newest === node, "the newest callback is last")
      #expect(ends.oldest === callbacks[0], "the oldest is first")
    }
    let pending = state.isPending
    #expect(pending)
    // The list owns a reference to each node; a state dropped while pending gives them back.
    state.releaseCallbacks()
    let (hasCallbacks, waiting) = (state.hasCallbacks, state.waitingCount)
    #expect(!hasCallbacks)
    #expect(waiting == 0)
    #expect(callbacks.allSatisfy { $0.next == nil }, "released nodes are in no list")
  }

  @Test func aLiveObserverIsFoundWhereverItWaits() {
    // `_PromiseNode` is a live observer by default; a settled promise is not one.
    var state = PromiseState()
    let empty = state.hasLiveObserver
    #expect(!empty)
    let settled = (0..<3).map { _ in Promise(0) }
    for node in settled { _ = state.register(node) }
    let noneLive = state.hasLiveObserver
    #expect(!noneLive, "the walk goes round the whole ring and stops")
    let live = _PromiseNode(queue: nil)
    _ = state.register(live)
    let found = state.hasLiveObserver
    #expect(found, "the newest node, the ring's last")
    state.releaseCallbacks()
  }

  @Test func removingACallbackKeepsTheOthersInOrder() {
    // Removed from the middle, the oldest end, the newest end, and the last one left.
    for removals in [[2], [0], [4], [0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [1, 3]] {
      var state = PromiseState()
      let callbacks = nodes(5)
      for node in callbacks { _ = state.register(node) }
      for index in removals {
        let removed = state.remove(callbacks[index])
        #expect(removed, "callback \(index) of \(removals)")
        #expect(callbacks[index].next == nil, "a removed node is in no list")
        // The list's reference to it is now the caller's.
        Unmanaged.passUnretained(callbacks[index]).release()
      }
      let again = state.remove(callbacks[removals[0]])
      #expect(!again, "a node is removed once")
      let kept = callbacks.indices.filter { !removals.contains($0) }
      var visited: [Int] = []
      state.forEachCallback { node in visited += callbacks.indices.filter { callbacks[$0] === node } }
      #expect(visited == kept)
      guard case .schedule(let ready) = state.fulfill() else {
        Issue.record("fulfil must schedule")
        return
      }
      #expect(list(ready).map { node in callbacks.firstIndex { $0 === node } } == kept)
    }
  }

  @Test func fulfillReturnsTheCallbacksInRegistrationOrder() {
    var state = PromiseState()
    let callbacks = nodes(5)
    for node in callbacks { _ = state.register(node) }

    guard case .schedule(let ready) = state.fulfill() else {
      Issue.record("the first fulfil must schedule the callbacks")
      return
    }
    let scheduled = list(ready)
    #expect(scheduled.count == callbacks.count)
    for (expected, actual) in zip(callbacks, scheduled) {
      #expect(expected === actual)
    }
    let (phase, hasCallbacks, waiting, pending) = (
      state.phase, state.hasCallbacks, state.waitingCount, state.isPending
    )
    #expect(phase == .fulfilled)
    #expect(!hasCallbacks, "a settled state keeps no callbacks")
    #expect(waiting == 0)
    #expect(!pending)
    #expect(callbacks.allSatisfy { $0.next == nil }, "the list handed back ends in nil")
  }

  @Test func rejectReturnsTheCallbacksInRegistrationOrderAndKeepsTheError() {
    var state = PromiseState()
    let callbacks = nodes(3)
    for node in callbacks { _ = state.register(node) }
    let error = IdentifiedError()
    guard case .schedule(let ready) = state.reject(error) else {
      Issue.record("the first reject must schedule the callbacks")
      return
    }
    #expect(zip(callbacks, list(ready)).allSatisfy { $0 === $1 })
    let (phase, stored, waiting) = (state.phase, state.error, state.waitingCount)
    #expect(phase == .rejected)
    #expect(isSame(stored, as: error))
    #expect(waiting == 0)
  }

  @Test func theStateOwnsItsErrorUntilItIsDropped() {
    weak var dropped: IdentifiedError?
    do {
      let error = IdentifiedError()
      dropped = error
      var state = PromiseState()
      _ = state.reject(error)
      for _ in 0..<3 {
        // Each read is a copy of its own; the state keeps its reference.
        let read = state.error
        #expect(isSame(read, as: error))
      }
      _ = state.reject(IdentifiedError())
      let kept = state.error
      #expect(isSame(kept, as: error), "a second rejection changes nothing")
    }
    #expect(dropped == nil, "the state released its error when it went")
    weak var created: IdentifiedError?
    do {
      let error = IdentifiedError()
      created = error
      let state = PromiseState.rejected(error)
      let stored = state.error
      #expect(isSame(stored, as: error))
    }
    #expect(created == nil)
  }

  @Test func settlingWithoutCallbacksSchedulesNothing() {
    var state = PromiseState()
    guard case .schedule(let ready) = state.reject(CoreTestError.first) else {
      Issue.record("the first reject must be accepted")
      return
    }
    #expect(ready.isEmpty)
    let stored = state.error
    #expect(stored as? CoreTestError == .first)
  }

  @Test func settlingTwiceIsIgnoredAndKeepsTheFirstOutcome() {
    var state = PromiseState()
    _ = state.register(_PromiseNode(queue: nil))
    if case .schedule(let ready) = state.fulfill() {
      #expect(list(ready).count == 1)
    }

    guard case .ignored = state.fulfill() else {
      Issue.record("a second fulfil must be ignored")
      return
    }
    guard case .ignored = state.reject(CoreTestError.first) else {
      Issue.record("a reject after a fulfil must be ignored")
      return
    }
    let (phase, error) = (state.phase, state.error)
    #expect(phase == .fulfilled)
    #expect(error == nil)
  }

  @Test func aRejectedStateIgnoresLaterOutcomes() {
    var state = PromiseState()
    _ = state.reject(CoreTestError.first)
    guard case .ignored = state.reject(CoreTestError.second) else {
      Issue.record("a second reject must be ignored")
      return
    }
    guard case .ignored = state.fulfill() else {
      Issue.record("a fulfil after a reject must be ignored")
      return
    }
    let (phase, error) = (state.phase, state.error)
    #expect(phase == .rejected)
    #expect(error as? CoreTestError == .first)
  }

  @Test func registeringAfterSettlementAsksTheOwnerToRunTheCallbackNow() {
    var state = PromiseState()
    _ = state.fulfill()
    let late = _PromiseNode(queue: nil)
    let action = state.register(late)
    let (hasCallbacks, waiting) = (state.hasCallbacks, state.waitingCount)
    #expect(action == .runNow)
    #expect(late.next == nil)
    #expect(!hasCallbacks)
    #expect(waiting == 0)
  }

  @Test func statesCreatedSettledBehaveLikeSettledOnes() {
    var fulfilled = PromiseState.fulfilled
    let (pending, phase) = (fulfilled.isPending, fulfilled.phase)
    let action = fulfilled.register(_PromiseNode(queue: nil))
    #expect(!pending)
    #expect(phase == .fulfilled)
    #expect(action == .runNow)
    guard case .ignored = fulfilled.fulfill() else {
      Issue.record("a settled state must ignore fulfil")
      return
    }

    var rejected = PromiseState.rejected(CoreTestError.second)
    let (rejectedPhase, error) = (rejected.phase, rejected.error)
    let rejectedAction = rejected.register(_PromiseNode(queue: nil))
    #expect(rejectedPhase == .rejected)
    #expect(error as? CoreTestError == .second)
    #expect(rejectedAction == .runNow)
  }

  @Test func manyCallbacksComeBackInOrder() {
    var state = PromiseState()
    let callbacks = nodes(1_000)
    for node in callbacks { _ = state.register(node) }
    let waiting = state.waitingCount
    #expect(waiting == 1_000)
    guard case .schedule(let ready) = state.fulfill() else {
      Issue.record("fulfil must schedule")
      return
    }
    let scheduled = list(ready)
    #expect(scheduled.count == 1_000)
    #expect(zip(callbacks, scheduled).allSatisfy { $0 === $1 })
  }
}
