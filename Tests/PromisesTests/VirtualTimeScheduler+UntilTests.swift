import Dispatch
import Foundation
import Testing

@testable import Promises

/// `VirtualTimeScheduler.advance(until:)`: moves virtual time until a promise settles, and
/// fails with a clear error instead of hanging.
@Suite("VirtualTimeScheduler.advance(until:)", .timeLimit(.minutes(1)))
struct VirtualTimeSchedulerUntilTests {
  struct Flaky: Error {}

  @Test func aRetryWithWaitsScheduledAsynchronouslyRunsToItsValue() async throws {
    // Each wait is scheduled only after an attempt has failed on its queue: a hand-written
    // sequence needs a waitForPendingWork() before each advance.
    let clock = VirtualTimeScheduler()
    let calls = Guarded(0)
    let result = Promise.retry(attempts: 5, delay: .constant(.seconds(10)), scheduler: clock) {
      calls.increment()
      return calls.value < 4 ? Promise<Int>(error: Flaky()) : Promise(42)
    }
    #expect(try await clock.advance(until: result) == 42)
    #expect(calls.value == 4)
    #expect(clock.now == .seconds(30))
  }

  @Test func aRejectionIsThrown() async {
    let clock = VirtualTimeScheduler()
    let (download, resolver) = Promise<Int>.pending()
    let limited = download.timeout(.seconds(5), scheduler: clock)
    await #expect {
      try await clock.advance(until: limited)
    } throws: { error in
      if case .timedOut? = error as? PromiseError { return true }
      return false
    }
    #expect(clock.now == .seconds(5))
    resolver.fulfill(0)
  }

  @Test func aDelayedRejectionArrivesAfterTheDelay() async {
    let clock = VirtualTimeScheduler()
    let delayed = Promise<Int>(error: Flaky()).delay(.seconds(3), scheduler: clock)
    await #expect(throws: Flaky.self) { try await clock.advance(until: delayed) }
    #expect(clock.now == .seconds(3))
  }

  @Test func callbacksOnAnotherQueueBetweenTimersAreLetFinish() async throws {
    let clock = VirtualTimeScheduler()
    let queue = DispatchQueue(label: "tests.until.callbacks")
    let result = Promise.after(.seconds(1), scheduler: clock)
      .then(on: queue) { Promise.after(.seconds(2), scheduler: clock) }
      .map(on: queue) { 7 }
    #expect(try await clock.advance(until: result, letting: [queue]) == 7)
    #expect(clock.now == .seconds(3))
  }

  @Test func aPromiseNothingWillSettleFailsNamingThePendingTimers() async {
    let clock = VirtualTimeScheduler()
    let (never, resolver) = Promise<Int>.pending()
    let ticking = tick(clock, times: 10_000)
    do {
      _ = try await clock.advance(until: never, maximumSteps: 20)
      Issue.record("expected virtualTimeStalled")
    } catch let error as PromiseError {
      guard case .virtualTimeStalled(let reason, let timers, let site) = error else {
        Issue.record("unexpected \(error)")
        return
      }
      #expect(reason.contains("20 steps"))
      #expect(timers == ["at 21.0 seconds on 'tests.until.tick'"])
      #expect(site == never.creationSite)
      #expect("\(error)".contains("tests.until.tick"))
    } catch {
      Issue.record("unexpected \(error)")
    }
    resolver.fulfill(0)
    ticking.cancel()
  }

  @Test func withNothingPendingItGivesUpAfterTheIdleTimeout() async {
    let clock = VirtualTimeScheduler()
    let (never, resolver) = Promise<Int>.pending()
    await #expect {
      _ = try await clock.advance(until: never, idleTimeout: .milliseconds(50))
    } throws: { error in
      guard case .virtualTimeStalled(_, let timers, _)? = error as? PromiseError else { return false }
      return timers.isEmpty && "\(error)".contains("no timer is pending")
    }
    #expect(never.isPending, "giving up does not cancel the promise")
    resolver.fulfill(1)
  }

  @Test func workScheduledLaterFromAnotherThreadIsPickedUp() async throws {
    let clock = VirtualTimeScheduler()
    let (start, resolver) = Promise<Void>.pending()
    let result = start.then { Promise.after(.seconds(5), scheduler: clock) }.map { "done" }
    Thread { resolver.fulfill() }.start()
    #expect(try await clock.advance(until: result) == "done")
  }

  /// Schedules work every second, `times` times (a timer that keeps going).
  private func tick(_ clock: VirtualTimeScheduler, times: Int) -> Promise<Void> {
    let queue = DispatchQueue(label: "tests.until.tick")
    let (done, resolver) = Promise<Void>.pending()
    @Sendable func next(_ remaining: Int) {
      guard remaining > 0, resolver.isPending else { return resolver.fulfill() }
      clock.schedule(after: .seconds(1), on: queue) { next(remaining - 1) }
    }
    next(times)
    return done
  }
}
