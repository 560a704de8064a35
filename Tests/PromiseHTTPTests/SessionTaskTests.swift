import Foundation
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// `SessionTask`: the work of starting (FoundationNetworking's `dataTask(with:)` and `resume()`)
/// runs on the caller's thread; a cancellation never waits for it, and its `cancel()` runs after
/// it; a cancellation that comes first means no task is made. The factory here waits at a gate
/// standing for FoundationNetworking's busy queue.
@Suite("Session tasks", .timeLimit(.minutes(1)))
struct SessionTaskTests {
  /// A protocol that never answers, so that a task the tests resume is completed by its
  /// cancellation only.
  ///
  /// FoundationNetworking (Swift 6.3.1) traps ("Trying to access a behaviour for a task that in
  /// not in the registry") when a `cancel()` lands while the task's own completion is under way:
  /// a task resumed against a closed port completes within a millisecond, and a run of this
  /// suite alongside others that load the machine met that trap.
  private final class NeverAnswers: URLProtocol {
    static var configuration: URLSessionConfiguration {
      let configuration = URLSessionConfiguration.ephemeral
      configuration.protocolClasses = [NeverAnswers.self]
      return configuration
    }

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {}
    override func stopLoading() {}
  }

  /// A `SessionTask` whose factory signals `entered`, waits at `gate` (at most 10 s), then counts
  /// itself in `made` and keeps the task in `tasks`.
  private struct Gated {
    let gate = DispatchSemaphore(value: 0)
    let entered = DispatchSemaphore(value: 0)
    let made = LockedBox(0)
    let tasks = LockedBox<[URLSessionTask]>([])
    let queue = DispatchQueue(label: "tests.session-task")
    let session = URLSession(configuration: NeverAnswers.configuration)
    let task: SessionTask

    /// `open`: the factory does not wait. (The gate is made closed and signalled: a semaphore
    /// made with 1 traps when it is released below its start value.)
    init(open: Bool) {
      if open { gate.signal() }
      task = SessionTask(queue: queue, delegate: SessionDelegate()) { [gate, entered, made, tasks, session] in
        entered.signal()
        _ = gate.wait(timeout: .now() + 60)
        made.withLock { $0 += 1 }
        // A task of a session that never answers: only a cancellation completes it.
        let task = session.dataTask(with: URL(string: "http://127.0.0.1:9/")!)
        tasks.withLock { $0.append(task) }
        return task
      }
    }
  }

  @Test func fromAThreadTheWorkRunsThereInOrder() async {
    let gated = Gated(open: true)
    defer { gated.session.invalidateAndCancel() }
    let madeBeforeReturning = await offThePool {
      gated.task.resume()
      return gated.made.load()
    }
    #expect(madeBeforeReturning == 1, "a start from a Dispatch queue was deferred to another thread")
    await offThePool { gated.task.cancel() }
  }

  @Test func aCancelBeforeTheTurnOfResumeMeansNoTaskIsMade() async {
    let gated = Gated(open: true)
    defer { gated.session.invalidateAndCancel() }
    await offThePool { gated.task.cancel() }
    await offThePool { gated.task.resume() }
    #expect(gated.made.load() == 0)
  }

  @Test func aCancelDoesNotWaitForAStartInProgressAndCancelsWhatItMakes() async {
    let gated = Gated(open: false)
    defer { gated.session.invalidateAndCancel() }
    // The start holds the queue at the gate, as a busy FoundationNetworking holds `make`.
    let started = Task { await offThePool { gated.task.resume() } }
    await offThePool { _ = gated.entered.wait(timeout: .now() + 60) }
    // Timed on the thread that cancels, not across the hops back to the test.
    let took = await offThePool { ContinuousClock().measure { gated.task.cancel() } }
    // Through the queue, `cancel()` returned only when the gate timed out (60 s).
    #expect(took < .seconds(30), "cancel() waited for the start: \(took)")
    gated.gate.signal()
    await started.value
    #expect(gated.made.load() == 1)
    // Made after the cancellation: cancelled at once, never resumed.
    let state = gated.tasks.load().first?.state
    #expect(state == .canceling || state == .completed, "\(String(describing: state))")
  }

  // MARK: The machine, as a value

  @Test func theMachineMakesNothingOnceCancelled() {
    var machine = SessionTask.Machine()
    let cancelled = machine.cancelled()
    let started = machine.resumeStarted()
    #expect(cancelled == nil)
    #expect(!started.makes)
  }

  @Test func theMachineCancelsATaskMadeAfterACancellation() {
    let session = URLSession(configuration: NeverAnswers.configuration)
    defer { session.invalidateAndCancel() }
    let task = session.dataTask(with: URL(string: "http://127.0.0.1:9/")!)
    var machine = SessionTask.Machine()
    let started = machine.resumeStarted()
    let cancelledWhileMaking = machine.cancelled()
    let resumes = machine.made(task)
    let cancelledAgain = machine.cancelled()
    #expect(started.makes)
    #expect(cancelledWhileMaking == nil, "nothing to cancel while the task is being made")
    #expect(!resumes, "a task made after a cancellation is not resumed (resume() cancels it)")
    #expect(cancelledAgain == nil)
    task.cancel()
  }

  @Test func theMachineHandsAMadeTaskToTheFirstCancellationOnly() {
    let session = URLSession(configuration: NeverAnswers.configuration)
    defer { session.invalidateAndCancel() }
    let task = session.dataTask(with: URL(string: "http://127.0.0.1:9/")!)
    var machine = SessionTask.Machine()
    let started = machine.resumeStarted()
    let resumes = machine.made(task)
    let startedAgain = machine.resumeStarted()
    let cancelled = machine.cancelled()
    let cancelledAgain = machine.cancelled()
    #expect(started.makes && resumes)
    #expect(!startedAgain.makes, "a second start makes nothing")
    #expect(cancelled === task)
    #expect(cancelledAgain == nil)
    task.cancel()
  }
}
