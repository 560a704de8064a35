import Foundation
import Testing

@testable import PromiseHTTP
@testable import Promises

/// The socket transport's threads: reused while idle, ended after their idle lifetime, and
/// holding nothing of a task once it has run.
@Suite("Socket threads", .timeLimit(.minutes(1)))
struct SocketThreadsTests {
  /// Runs `work` on `threads` and waits (at most 20 s) until it has run; returns its thread's
  /// identity (`pthread_self`).
  private func runAndWait(_ threads: SocketThreads, _ work: @escaping @Sendable () -> Void = {}) async
    -> UInt?
  {
    let ran = LockedBox<UInt?>(nil)
    let done = DispatchSemaphore(value: 0)
    threads.run {
      work()
      ran.withLock { $0 = UInt(bitPattern: Int(bitPattern: pthread_self())) }
      done.signal()
    }
    return await offThePool { done.wait(timeout: .now() + 20) == .success ? ran.load() : nil }
  }

  @Test func sequentialWorkRunsOnOneThread() async {
    let threads = SocketThreads(idleLifetime: 30)
    var seen: [UInt] = []
    for _ in 0..<20 {
      guard let thread = await runAndWait(threads) else {
        Issue.record("the work did not run")
        return
      }
      seen.append(thread)
      // The worker offers itself again right after the work returns.
      #expect(await eventually { threads.idleCount == 1 })
    }
    #expect(Set(seen).count == 1, "one thread served every run")
  }

  @Test func anIdleThreadEndsAfterItsLifetime() async {
    let threads = SocketThreads(idleLifetime: 0.1)
    _ = await runAndWait(threads)
    #expect(await eventually { threads.idleCount == 0 })
    // A new run after that gets a new thread, and runs.
    #expect(await runAndWait(threads) != nil)
  }

  @Test func theWorkIsReleasedWhenItHasRun() async {
    final class Held: Sendable {}
    let threads = SocketThreads(idleLifetime: 30)
    weak var weakHeld: Held?
    do {
      let held = Held()
      weakHeld = held
      _ = await runAndWait(threads) { _ = held }
    }
    // The thread idles for 30 s, but the closure it ran, and what it held, are gone.
    #expect(await eventually { weakHeld == nil })
  }

  @Test func theIdleThreadsAreBounded() async {
    let threads = SocketThreads(idleLifetime: 30, maximumIdle: 2)
    let gate = DispatchSemaphore(value: 0)
    let started = DispatchSemaphore(value: 0)
    for _ in 0..<4 {
      threads.run {
        started.signal()
        gate.wait()
      }
    }
    let allStarted = await offThePool {
      (0..<4).allSatisfy { _ in started.wait(timeout: .now() + 20) == .success }
    }
    #expect(allStarted)
    for _ in 0..<4 { gate.signal() }
    #expect(await eventually { threads.idleCount == 2 })
  }
}
