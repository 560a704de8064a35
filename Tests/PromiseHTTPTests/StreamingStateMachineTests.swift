import Foundation
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// `RequestStateMachine.committed`, as a value: what a streamed body changes in a request.
@Suite("Streaming in the request state machine")
struct StreamingStateMachineTests {
  typealias Helpers = RequestStateMachineTests

  @Test func committingCancelsTheTimeoutAndArmsTheOwnDeadline() {
    var machine = Helpers.machine(timeout: .seconds(10), deadlineAllowed: .seconds(5))
    _ = machine.slotGranted(now: .zero, deadlineRemaining: .seconds(5))
    let deadline = FakeTimer()
    _ = machine.timerArmed(deadline, .deadline)
    _ = machine.adapted(URLRequest(url: Helpers.url), now: .zero)
    _ = machine.exchangeStarted(FakeExchange(), id: 1)
    guard case .commit(let timer, let own) = machine.committed(ownDeadlineRemaining: .seconds(3)) else {
      Issue.record("expected .commit")
      return
    }
    #expect(timer as? FakeTimer === deadline)
    #expect(own == .seconds(3))
    // The timer of `timeout`, firing as it was being cancelled, ends nothing.
    guard case .none = machine.deadlinePassed() else {
      Issue.record("the client's timeout ended a committed request")
      return
    }
    let ownTimer = FakeTimer()
    guard case .none = machine.timerArmed(ownTimer, .ownDeadline) else {
      Issue.record("the own deadline's timer was refused")
      return
    }
    let finish = Helpers.finish(machine.ownDeadlinePassed())
    guard case .failure(HTTPError.timedOut(_, let allowed))? = finish?.result else {
      Issue.record("expected timedOut, got \(String(describing: finish?.result))")
      return
    }
    #expect(allowed == .seconds(5))
    #expect(finish?.timers.first as? FakeTimer === ownTimer)
    #expect(finish?.releaseSlot == true)
  }

  @Test func withoutItsOwnDeadlineACommittedRequestHasNoTimer() {
    var (machine, _, _) = Helpers.exchanging()
    guard case .commit(_, nil) = machine.committed(ownDeadlineRemaining: nil) else {
      Issue.record("expected .commit without a deadline")
      return
    }
    guard case .none = machine.ownDeadlinePassed() else {
      Issue.record("no own deadline was armed")
      return
    }
  }

  @Test func aCommittedExchangeThatFailsIsDeliveredWithoutAStepDeciding() {
    var (machine, _, _) = Helpers.exchanging()
    _ = machine.committed(ownDeadlineRemaining: nil)
    let cut = HTTPError.transportFailure(URLError(.networkConnectionLost), url: Helpers.url)
    let finish = Helpers.finish(machine.exchangeCompleted(.failure(cut), id: 1, now: .seconds(1)))
    guard case .failure(HTTPError.transport(let error, _))? = finish?.result else {
      Issue.record("expected the cut, got \(String(describing: finish?.result))")
      return
    }
    #expect(error.code == .networkConnectionLost)
    #expect(finish?.exchange == nil)
    #expect(machine.phase == .finished)
  }

  @Test func anUncommittedExchangeStillGoesToTheSteps() {
    var (machine, _, _) = Helpers.exchanging()
    guard case .decide = machine.exchangeCompleted(Helpers.response(503), id: 1, now: .seconds(1)) else {
      Issue.record("expected .decide")
      return
    }
    // Too late to commit: the exchange has ended.
    guard case .none = machine.committed(ownDeadlineRemaining: nil) else {
      Issue.record("committed outside an exchange")
      return
    }
  }

  @Test func anOwnDeadlineAlreadyPassedEndsTheRequestAtCommit() {
    var (machine, _, exchange) = Helpers.exchanging()
    let finish = Helpers.finish(machine.committed(ownDeadlineRemaining: .zero))
    guard case .failure(HTTPError.timedOut)? = finish?.result else {
      Issue.record("expected timedOut")
      return
    }
    #expect(finish?.exchange as? FakeExchange === exchange)
  }
}
