import Foundation
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// `SessionTask`: from a task, starting and cancelling only queue the work that
/// FoundationNetworking may hold up (its `dataTask(with:)`, `resume()` and `cancel()` wait for
/// a work queue shared by every session); from anywhere else, the work runs on the caller's
/// thread, in order.
///
/// The factory here stands for FoundationNetworking's busy queue: it waits at a gate the test
/// opens. (A test that held FoundationNetworking's real queue — through a URLProtocol of a
/// session of its own — held every URLSession request of the test process with it.)
@Suite("Session tasks", .timeLimit(.minutes(1)))
struct SessionTaskTests {
  /// A task whose factory waits at `gate` (at most `limit`), then counts itself in `made`.
  private static func gatedTask(
    gate: DispatchSemaphore, made: LockedBox<Int>, limit: Double = 10
  ) -> (SessionTask, URLSession) {
    let session = URLSession(configuration: .ephemeral)
    let task = SessionTask(queue: DispatchQueue(label: "tests.session-task"), delegate: SessionDelegate()) {
      _ = gate.wait(timeout: .now() + limit)
      made.withLock { $0 += 1 }
      // Never resumed against a server: the test cancels it.
      return session.dataTask(with: URL(string: "http://127.0.0.1:9/")!)
    }
    return (task, session)
  }

  @Test func fromATaskResumeAndCancelReturnWhileTheWorkWaits() async {
    let gate = DispatchSemaphore(value: 0)
    let made = LockedBox(0)
    let (task, session) = Self.gatedTask(gate: gate, made: made)
    defer { session.invalidateAndCancel() }
    task.resume()
    task.cancel()
    // Inline, `resume()` would have returned only once the gate timed out (10 s), task made.
    #expect(made.load() == 0, "resume() ran its work on the calling task's thread")
    gate.signal()
    let madeOnce = await offThePool {
      let deadline = Date().addingTimeInterval(10)
      while made.load() == 0 && Date() < deadline { usleep(1_000) }
      return made.load() == 1
    }
    #expect(madeOnce)
  }

  @Test func fromAThreadTheWorkRunsThereInOrder() async {
    let gate = DispatchSemaphore(value: 0)
    gate.signal()  // open (a semaphore made with 1 traps when released below its start value)
    let made = LockedBox(0)
    let (task, session) = Self.gatedTask(gate: gate, made: made)
    defer { session.invalidateAndCancel() }
    let madeBeforeReturning = await offThePool {
      task.resume()
      return made.load()
    }
    #expect(madeBeforeReturning == 1, "a start from a Dispatch queue was deferred to another thread")
    await offThePool { task.cancel() }
  }

  @Test func aCancelBeforeTheTurnOfResumeMeansNoTaskIsMade() async {
    let gate = DispatchSemaphore(value: 0)
    gate.signal()  // open (a semaphore made with 1 traps when released below its start value)
    let made = LockedBox(0)
    let (task, session) = Self.gatedTask(gate: gate, made: made)
    defer { session.invalidateAndCancel() }
    await offThePool { task.cancel() }
    await offThePool { task.resume() }
    #expect(made.load() == 0)
  }
}
