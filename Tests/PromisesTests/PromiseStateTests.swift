import Testing

@testable import Promises

/// `PromiseState` is a plain value: these tests drive it without threads, queues or promises,
/// the way the state machines of async-http-client are tested.
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
    #expect(state.isPending)
    #expect(state.phase == .pending)
    #expect(state.callbacks.isEmpty)
    #expect(state.error == nil)
    #expect(state.waitingCount == 0)
  }

  @Test func registeringWhilePendingStoresTheCallback() {
    var state = PromiseState()
    let callbacks = nodes(3)
    for (index, node) in callbacks.enumerated() {
      #expect(state.register(node) == .stored)
      #expect(state.waitingCount == index + 1)
      #expect(state.callbacks.tail?.takeUnretainedValue() === node, "the newest callback is last")
      #expect(state.callbacks.head?.takeUnretainedValue() === callbacks[0], "the oldest is first")
    }
    #expect(state.isPending)
    // The list owns a reference to each node; a state dropped while pending gives them back.
    state.releaseCallbacks()
    #expect(state.callbacks.isEmpty)
    #expect(state.waitingCount == 0)
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
    #expect(state.phase == .fulfilled)
    #expect(state.callbacks.isEmpty, "a settled state keeps no callbacks")
    #expect(state.waitingCount == 0)
    #expect(!state.isPending)
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
    #expect(state.phase == .rejected)
    #expect(isSame(state.error, as: error))
    #expect(state.waitingCount == 0)
  }

  @Test func settlingWithoutCallbacksSchedulesNothing() {
    var state = PromiseState()
    guard case .schedule(let ready) = state.reject(CoreTestError.first) else {
      Issue.record("the first reject must be accepted")
      return
    }
    #expect(ready.isEmpty)
    #expect(state.error as? CoreTestError == .first)
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
    #expect(state.phase == .fulfilled)
    #expect(state.error == nil)
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
    #expect(state.phase == .rejected)
    #expect(state.error as? CoreTestError == .first)
  }

  @Test func registeringAfterSettlementAsksTheOwnerToRunTheCallbackNow() {
    var state = PromiseState()
    _ = state.fulfill()
    let late = _PromiseNode(queue: nil)
    #expect(state.register(late) == .runNow)
    #expect(late.next == nil)
    #expect(state.callbacks.isEmpty)
    #expect(state.waitingCount == 0)
  }

  @Test func statesCreatedSettledBehaveLikeSettledOnes() {
    var fulfilled = PromiseState.fulfilled
    #expect(!fulfilled.isPending)
    #expect(fulfilled.phase == .fulfilled)
    #expect(fulfilled.register(_PromiseNode(queue: nil)) == .runNow)
    guard case .ignored = fulfilled.fulfill() else {
      Issue.record("a settled state must ignore fulfil")
      return
    }

    var rejected = PromiseState.rejected(CoreTestError.second)
    #expect(rejected.phase == .rejected)
    #expect(rejected.error as? CoreTestError == .second)
    #expect(rejected.register(_PromiseNode(queue: nil)) == .runNow)
  }

  @Test func stateIsAValueCopiesDoNotShareTheirPhase() {
    var original = PromiseState()
    let copy = original
    _ = original.fulfill()
    #expect(copy.isPending)
    #expect(original.phase == .fulfilled)
  }

  @Test func manyCallbacksComeBackInOrder() {
    var state = PromiseState()
    let callbacks = nodes(1_000)
    for node in callbacks { _ = state.register(node) }
    #expect(state.waitingCount == 1_000)
    guard case .schedule(let ready) = state.fulfill() else {
      Issue.record("fulfil must schedule")
      return
    }
    let scheduled = list(ready)
    #expect(scheduled.count == 1_000)
    #expect(zip(callbacks, scheduled).allSatisfy { $0 === $1 })
  }
}
