import Foundation
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A timer handle that records its cancellation.
final class FakeTimer: ScheduledWork, @unchecked Sendable {
  // Safety: `cancelled` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var cancelled = false

  var isCancelled: Bool { lock.withLock { cancelled } }

  func cancel() { lock.withLock { cancelled = true } }
}

/// An exchange handle that records its cancellation.
final class FakeExchange: RequestCancellable, @unchecked Sendable {
  // Safety: `cancelled` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var cancelled = false

  var isCancelled: Bool { lock.withLock { cancelled } }

  func cancel() { lock.withLock { cancelled = true } }
}

typealias Machine = RequestStateMachine

@Suite("RequestStateMachine")
struct RequestStateMachineTests {
  static let url = URL(string: "http://127.0.0.1:8080/api/config")!
  static let ticket = RequestQueueTicket(key: RequestQueueKey(url), id: 1)

  static func machine(
    timeout: Duration = .seconds(10), maximumQueueWait: Duration = .seconds(60),
    deadlineAllowed: Duration? = nil
  ) -> Machine {
    Machine(
      Machine.Settings(
        request: URLRequest(url: url), method: .get, acceptable: 200..<300, timeout: timeout,
        maximumQueueWait: maximumQueueWait, deadlineAllowed: deadlineAllowed))
  }

  static func response(_ status: Int, headers: HTTPHeaders = [:]) -> Result<HTTPResponse, HTTPError> {
    .success(HTTPResponse(statusCode: status, headers: headers, requestURL: url))
  }

  /// A machine that has left the queue at time zero and sent its first exchange (id 1).
  static func exchanging(timeout: Duration = .seconds(10)) -> (Machine, FakeTimer, FakeExchange) {
    var machine = machine(timeout: timeout)
    _ = machine.slotGranted(now: .zero, deadlineRemaining: nil)
    let deadline = FakeTimer()
    _ = machine.timerArmed(deadline, .deadline)
    _ = machine.adapted(URLRequest(url: url), now: .zero)
    let exchange = FakeExchange()
    _ = machine.exchangeStarted(exchange, id: 1)
    return (machine, deadline, exchange)
  }

  /// The `Finish` of `action`, recording an issue when it is another action.
  static func finish(
    _ action: Machine.Action, sourceLocation: SourceLocation = #_sourceLocation
  ) -> Machine.Finish? {
    guard case .finish(let finish) = action else {
      Issue.record("expected .finish, got \(action)", sourceLocation: sourceLocation)
      return nil
    }
    return finish
  }

  // MARK: The way through

  @Test func aFreeSlotStartsTheDeadlineThenAuthorizes() {
    var machine = Self.machine(timeout: .seconds(10))
    guard
      case .start(let waitTimer, let deadline, _, let attempt) =
        machine.slotGranted(now: .seconds(100), deadlineRemaining: nil)
    else {
      Issue.record("the slot did not start the request")
      return
    }
    #expect(waitTimer == nil)
    #expect(deadline == .seconds(10))
    #expect(attempt.number == 1 && attempt.replays == 0 && attempt.remaining == .seconds(10))
    #expect(machine.phase == .authorizing)
  }

  @Test func theAdaptedRequestIsSentWithLibcurlsTimeoutJustBeyondTheDeadline() {
    var machine = Self.machine(timeout: .seconds(10))
    _ = machine.slotGranted(now: .zero, deadlineRemaining: nil)
    var adapted = URLRequest(url: Self.url)
    adapted.setValue("Bearer t", forHTTPHeaderField: "Authorization")
    guard
      case .exchange(let request, let id, let attempt) = machine.adapted(adapted, now: .milliseconds(2500))
    else {
      Issue.record("the adapted request was not sent")
      return
    }
    #expect(id == 1)
    #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer t")
    #expect(request.timeoutInterval == 9)
    #expect(attempt.remaining == .milliseconds(7500))
    #expect(machine.phase == .exchanging)
  }

  @Test(arguments: [
    Duration.seconds(Int64.max), .seconds(Int64.max / 2), .seconds(1 << 40), .seconds(2_000_000_000),
  ])
  func libcurlsTimeoutIsCappedSoThatFoundationNetworkingCanCountItInMilliseconds(remaining: Duration) throws {
    let interval = Machine.transportTimeoutInterval(remaining: remaining)
    // FoundationNetworking computes `Int(timeoutInterval) * 1000` (and a Dispatch timer of that
    // many milliseconds): it traps (SIGILL) if that overflows.
    #expect(interval >= 1)
    try #require(interval < 1e15, "Int(interval) * 1000 * 1_000_000 must fit in 64 bits")
    let (milliseconds, overflow) = Int(interval).multipliedReportingOverflow(by: 1000)
    #expect(!overflow)
    #expect(!milliseconds.multipliedReportingOverflow(by: 1_000_000).overflow)
    // Still far beyond any deadline the client enforces itself in practice.
    #expect(interval >= 365 * 86_400)
  }

  @Test func libcurlsTimeoutIsJustBeyondShortDeadlines() {
    #expect(Machine.transportTimeoutInterval(remaining: .zero) == 1)
    #expect(Machine.transportTimeoutInterval(remaining: .milliseconds(7500)) == 9)
    #expect(Machine.transportTimeoutInterval(remaining: .seconds(30)) == 31)
  }

  @Test func aHugeClientTimeoutSendsTheRequestWithACappedLibcurlTimeout() {
    var machine = Self.machine(timeout: .seconds(Int64.max))
    _ = machine.slotGranted(now: .seconds(1000), deadlineRemaining: nil)
    guard case .exchange(let request, _, _) = machine.adapted(URLRequest(url: Self.url), now: .seconds(1001))
    else {
      Issue.record("the adapted request was not sent")
      return
    }
    #expect(request.timeoutInterval == Machine.maximumTransportTimeout)
  }

  @Test func anAcceptableResponseFulfilsReleasesTheSlotAndCancelsTheDeadline() throws {
    var (machine, deadline, _) = Self.exchanging()
    guard case .decide = machine.exchangeCompleted(Self.response(200), id: 1, now: .seconds(1)) else {
      Issue.record("the outcome was not given to the steps")
      return
    }
    #expect(machine.phase == .deciding)
    let finish = try #require(Self.finish(machine.decided(.proceed, now: .seconds(1))))
    #expect(try finish.result.get().statusCode == 200)
    #expect(finish.releaseSlot)
    #expect(finish.exchange == nil)
    #expect(finish.timers.count == 1 && finish.timers.first as? FakeTimer === deadline)
    #expect(machine.phase == .finished)
  }

  @Test func anUnacceptableStatusRejectsWithItsStatus() throws {
    var (machine, _, _) = Self.exchanging()
    _ = machine.exchangeCompleted(Self.response(404), id: 1, now: .seconds(1))
    let finish = try #require(Self.finish(machine.decided(.proceed, now: .seconds(1))))
    #expect((finish.result.failure as? HTTPError)?.statusCode == 404)
  }

  @Test func aRetryBacksOffThenStartsTheNextAttempt() {
    var (machine, _, _) = Self.exchanging()
    _ = machine.exchangeCompleted(Self.response(503), id: 1, now: .seconds(1))
    guard
      case .backOff(let delay, let attempt) = machine.decided(.retry(after: .seconds(2)), now: .seconds(1))
    else {
      Issue.record("the retry did not back off")
      return
    }
    #expect(delay == .seconds(2) && attempt.number == 1)
    #expect(machine.phase == .backingOff)
    let backoff = FakeTimer()
    guard case .none = machine.timerArmed(backoff, .backoff(attempt: 1)) else {
      Issue.record("the backoff timer was not kept")
      return
    }
    guard case .adapt(_, let next) = machine.backoffElapsed(after: 1, now: .seconds(3)) else {
      Issue.record("the next attempt did not start")
      return
    }
    #expect(next.number == 2 && next.remaining == .seconds(7))
    #expect(machine.phase == .authorizing)
    guard case .exchange(_, let id, _) = machine.adapted(URLRequest(url: Self.url), now: .seconds(3)) else {
      Issue.record("the second attempt was not sent")
      return
    }
    #expect(id == 2)
  }

  @Test func aRetryThatCannotStartBeforeTheDeadlineDeliversTheOutcomeAtOnce() throws {
    var (machine, _, _) = Self.exchanging(timeout: .seconds(1))
    _ = machine.exchangeCompleted(Self.response(503), id: 1, now: .milliseconds(500))
    let finish = try #require(
      Self.finish(machine.decided(.retry(after: .milliseconds(500)), now: .milliseconds(500))))
    #expect((finish.result.failure as? HTTPError)?.statusCode == 503)
    #expect(finish.releaseSlot)
  }

  @Test func aReplayAdaptsAgainWithoutCountingAnAttemptAndIsBounded() throws {
    var (machine, _, _) = Self.exchanging()
    for replay in 1...HTTPDecision.maximumReplays {
      _ = machine.exchangeCompleted(Self.response(401), id: UInt64(replay), now: .seconds(1))
      guard case .adapt(_, let attempt) = machine.decided(.replay, now: .seconds(1)) else {
        Issue.record("replay \(replay) did not adapt again")
        return
      }
      #expect(attempt.number == 1 && attempt.replays == replay)
      _ = machine.adapted(URLRequest(url: Self.url), now: .seconds(1))
    }
    _ = machine.exchangeCompleted(
      Self.response(401), id: UInt64(HTTPDecision.maximumReplays + 1), now: .seconds(1))
    let finish = try #require(Self.finish(machine.decided(.replay, now: .seconds(1))))
    #expect((finish.result.failure as? HTTPError)?.statusCode == 401)
  }

  @Test func aStepThatFailsEndsTheRequestWithItsError() throws {
    struct Refused: Error {}
    var machine = Self.machine()
    _ = machine.slotGranted(now: .zero, deadlineRemaining: nil)
    let finish = try #require(Self.finish(machine.stepFailed(Refused())))
    #expect(finish.result.failure is Refused)
    #expect(finish.releaseSlot)
  }

  @Test func aFailDecisionEndsTheRequestWithItsError() throws {
    struct Refused: Error {}
    var (machine, _, _) = Self.exchanging()
    _ = machine.exchangeCompleted(Self.response(200), id: 1, now: .seconds(1))
    let finish = try #require(Self.finish(machine.decided(.fail(Refused()), now: .seconds(1))))
    #expect(finish.result.failure is Refused)
  }

  // MARK: The deadline

  @Test func theDeadlineCancelsTheExchangeInFlight() throws {
    var (machine, deadline, exchange) = Self.exchanging(timeout: .seconds(3))
    let finish = try #require(Self.finish(machine.deadlinePassed()))
    guard case .timedOut(let url, let allowed)? = finish.result.failure as? HTTPError else {
      Issue.record("not a timeout: \(finish.result)")
      return
    }
    #expect(allowed == .seconds(3))
    #expect(url?.path == "/api/config")
    #expect(finish.exchange as? FakeExchange === exchange)
    #expect(finish.timers.first as? FakeTimer === deadline)
    guard case .none = machine.exchangeCompleted(Self.response(200), id: 1, now: .seconds(4)) else {
      Issue.record("a late outcome was acted on")
      return
    }
  }

  @Test func theDeadlineDuringTheBackoffEndsItAndTheBackoffIsCancelled() throws {
    var (machine, _, _) = Self.exchanging()
    _ = machine.exchangeCompleted(Self.response(503), id: 1, now: .seconds(1))
    _ = machine.decided(.retry(after: .seconds(2)), now: .seconds(1))
    let backoff = FakeTimer()
    _ = machine.timerArmed(backoff, .backoff(attempt: 1))
    let finish = try #require(Self.finish(machine.deadlinePassed()))
    #expect(finish.timers.contains { $0 as? FakeTimer === backoff })
    guard case .timedOut? = finish.result.failure as? HTTPError else {
      Issue.record("not a timeout: \(finish.result)")
      return
    }
    guard case .none = machine.backoffElapsed(after: 1, now: .seconds(3)) else {
      Issue.record("a finished request started another attempt")
      return
    }
  }

  @Test func anOwnDeadlineEarlierThanTheTimeoutIsTheOneReported() throws {
    var machine = Self.machine(timeout: .seconds(30), deadlineAllowed: .seconds(5))
    guard case .start(_, let length, _, _) = machine.slotGranted(now: .zero, deadlineRemaining: .seconds(2))
    else {
      Issue.record("the slot did not start the request")
      return
    }
    #expect(length == .seconds(2))
    let finish = try #require(Self.finish(machine.deadlinePassed()))
    guard case .timedOut(_, let allowed)? = finish.result.failure as? HTTPError else {
      Issue.record("not a timeout: \(finish.result)")
      return
    }
    #expect(allowed == .seconds(5))
  }

  // MARK: The queue

  @Test func aQueuedRequestArmsTheQueueWaitAndStartsWhenItGetsASlot() {
    var machine = Self.machine(maximumQueueWait: .seconds(60))
    guard case .arm(.queueWait, let wait) = machine.queued(Self.ticket, deadlineRemaining: nil) else {
      Issue.record("no queue-wait timer")
      return
    }
    #expect(wait == .seconds(60))
    #expect(machine.phase == .queued)
    let timer = FakeTimer()
    _ = machine.timerArmed(timer, .queueWait)
    guard case .start(let waitTimer?, _, _, _) = machine.slotGranted(now: .seconds(5), deadlineRemaining: nil)
    else {
      Issue.record("the slot did not start the request and cancel the wait")
      return
    }
    #expect(waitTimer as? FakeTimer === timer)
  }

  @Test func theQueueWaitLimitRejectsAnUnsentRequest() throws {
    var machine = Self.machine(maximumQueueWait: .seconds(1))
    _ = machine.queued(Self.ticket, deadlineRemaining: nil)
    guard case .leaveQueue(let ticket, true) = machine.queueWaitExpired() else {
      Issue.record("the expiry did not leave the queue")
      return
    }
    #expect(ticket == Self.ticket)
    let finish = try #require(Self.finish(machine.queueWaitEnded()))
    guard case .queueWaitExceeded(let limit, _)? = finish.result.failure as? HTTPError else {
      Issue.record("not queueWaitExceeded: \(finish.result)")
      return
    }
    #expect(limit == .seconds(1))
    #expect(!finish.releaseSlot)
  }

  @Test func anOwnDeadlineShorterThanTheQueueWaitEndsTheWaitAsATimeout() throws {
    var machine = Self.machine(maximumQueueWait: .seconds(60), deadlineAllowed: .seconds(3))
    guard case .arm(.queueWait, let wait) = machine.queued(Self.ticket, deadlineRemaining: .seconds(2)) else {
      Issue.record("no queue-wait timer")
      return
    }
    #expect(wait == .seconds(2))
    _ = machine.queueWaitExpired()
    let finish = try #require(Self.finish(machine.queueWaitEnded()))
    guard case .timedOut(_, let allowed)? = finish.result.failure as? HTTPError else {
      Issue.record("not a timeout: \(finish.result)")
      return
    }
    #expect(allowed == .seconds(3))
  }

  @Test func aSlotGivenBeforeTheTicketCameBackWins() {
    var machine = Self.machine()
    _ = machine.slotGranted(now: .zero, deadlineRemaining: nil)
    guard case .none = machine.queued(Self.ticket, deadlineRemaining: nil) else {
      Issue.record("a started request was queued")
      return
    }
    #expect(machine.phase == .authorizing)
  }

  // MARK: Cancellation

  @Test func cancellingWhileQueuedLeavesTheQueueAndASlotGivenLaterGoesBack() throws {
    var machine = Self.machine()
    _ = machine.queued(Self.ticket, deadlineRemaining: nil)
    let timer = FakeTimer()
    _ = machine.timerArmed(timer, .queueWait)
    let finish = try #require(Self.finish(machine.cancelled()))
    #expect(finish.result.failure is CancellationError)
    #expect(finish.ticket == Self.ticket)
    #expect(finish.timers.first as? FakeTimer === timer)
    #expect(!finish.releaseSlot)
    guard case .releaseSlot = machine.slotGranted(now: .zero, deadlineRemaining: nil) else {
      Issue.record("a slot given to a cancelled request was kept")
      return
    }
  }

  @Test func cancellingBeforeTheTicketCameBackLeavesTheQueueThen() throws {
    var machine = Self.machine()
    _ = try #require(Self.finish(machine.cancelled()))
    guard case .leaveQueue(let ticket, false) = machine.queued(Self.ticket, deadlineRemaining: nil) else {
      Issue.record("the late ticket was not withdrawn")
      return
    }
    #expect(ticket == Self.ticket)
  }

  @Test func cancellingAnExchangeCancelsItAndReleasesTheSlot() throws {
    var (machine, _, exchange) = Self.exchanging()
    let finish = try #require(Self.finish(machine.cancelled()))
    #expect(finish.result.failure is CancellationError)
    #expect(finish.exchange as? FakeExchange === exchange)
    #expect(finish.releaseSlot)
  }

  @Test func cancellingAfterTheEndDoesNothing() {
    var (machine, _, _) = Self.exchanging()
    _ = machine.exchangeCompleted(Self.response(200), id: 1, now: .seconds(1))
    _ = machine.decided(.proceed, now: .seconds(1))
    guard case .none = machine.cancelled() else {
      Issue.record("a finished request was cancelled")
      return
    }
    guard case .none = machine.deadlinePassed() else {
      Issue.record("a finished request timed out")
      return
    }
  }

  // MARK: Late handles

  @Test func lateHandlesOfAFinishedRequestAreCancelled() {
    var machine = Self.machine()
    _ = machine.slotGranted(now: .zero, deadlineRemaining: nil)
    _ = machine.adapted(URLRequest(url: Self.url), now: .zero)
    _ = machine.cancelled()
    let exchange = FakeExchange()
    guard case .cancelExchange(let cancelled) = machine.exchangeStarted(exchange, id: 1) else {
      Issue.record("a late exchange was kept running")
      return
    }
    #expect(cancelled as? FakeExchange === exchange)
    let timer = FakeTimer()
    guard case .cancelTimer(let stale) = machine.timerArmed(timer, .deadline) else {
      Issue.record("a late timer was kept")
      return
    }
    #expect(stale as? FakeTimer === timer)
  }

  @Test func anExchangeWhoseOutcomeCameFirstIsNotCancelled() {
    var machine = Self.machine()
    _ = machine.slotGranted(now: .zero, deadlineRemaining: nil)
    _ = machine.adapted(URLRequest(url: Self.url), now: .zero)
    _ = machine.exchangeCompleted(Self.response(200), id: 1, now: .zero)
    guard case .none = machine.exchangeStarted(FakeExchange(), id: 1) else {
      Issue.record("a completed exchange was cancelled")
      return
    }
  }

  @Test func aBackoffTimerOfAnotherAttemptIsNotKept() {
    var (machine, _, _) = Self.exchanging()
    _ = machine.exchangeCompleted(Self.response(503), id: 1, now: .seconds(1))
    _ = machine.decided(.retry(after: .seconds(1)), now: .seconds(1))
    guard case .cancelTimer = machine.timerArmed(FakeTimer(), .backoff(attempt: 2)) else {
      Issue.record("a backoff timer of another attempt was kept")
      return
    }
    guard case .none = machine.backoffElapsed(after: 2, now: .seconds(2)) else {
      Issue.record("another attempt's backoff started an attempt")
      return
    }
    #expect(machine.phase == .backingOff)
  }
}

extension Result {
  /// The error of a failure, `nil` for a success.
  fileprivate var failure: Failure? {
    if case .failure(let error) = self { return error }
    return nil
  }
}
