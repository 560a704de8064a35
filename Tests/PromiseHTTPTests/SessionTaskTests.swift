import Foundation
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// `SessionTask`: the work of starting and cancelling (FoundationNetworking's `dataTask(with:)`,
/// `resume()` and `cancel()`) runs on the caller's thread, in order; a cancellation that comes
/// first means no task is made. The factory here waits at a gate standing for
/// FoundationNetworking's queue.
@Suite("Session tasks", .timeLimit(.minutes(1)))
struct SessionTaskTests {
  /// A `SessionTask` whose factory waits at `gate` (at most 10 s), then counts itself in `made`.
  private struct Gated {
    let gate = DispatchSemaphore(value: 0)
    let made = LockedBox(0)
    let queue = DispatchQueue(label: "tests.session-task")
    let session = URLSession(configuration: .ephemeral)
    let task: SessionTask

    /// `open`: the factory does not wait. (The gate is made closed and signalled: a semaphore
    /// made with 1 traps when it is released below its start value.)
    init(open: Bool) {
      if open { gate.signal() }
      task = SessionTask(queue: queue, delegate: SessionDelegate()) { [gate, made, session] in
        _ = gate.wait(timeout: .now() + 10)
        made.withLock { $0 += 1 }
        // Never resumed against a server: the tests cancel it.
        return session.dataTask(with: URL(string: "http://127.0.0.1:9/")!)
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
}
