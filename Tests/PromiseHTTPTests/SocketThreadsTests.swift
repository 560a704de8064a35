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
  /// A write that fails with EPIPE inside `withBrokenPipeSignalHeld`, on a thread that lets
  /// SIGPIPE through (as a program's main thread does: the connection pool may close a TLS
  /// connection, and send its close_notify, there), raises no signal that ends the process, and
  /// leaves the thread's mask as it was with nothing pending. In a child process: without the
  /// helper, the signal ends it. Exit status: 0, or which check failed.
  @Test(.tags(.childProcess)) func aBrokenPipeInsideTheHelperDoesNotEndTheProcess() async {
    await #expect(processExitsWith: .exitCode(0)) {
      let status = LockedBox<Int32>(90)
      let done = DispatchSemaphore(value: 0)
      let thread = Thread {
        defer { done.signal() }
        var pipeOnly = sigset_t()
        sigemptyset(&pipeOnly)
        sigaddset(&pipeOnly, SIGPIPE)
        pthread_sigmask(SIG_UNBLOCK, &pipeOnly, nil)
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else {
          status.withLock { $0 = 91 }
          return
        }
        close(pair[1])
        let (written, code) = SocketThreads.withBrokenPipeSignalHeld { () -> (Int, Int32) in
          var byte: UInt8 = 1
          let written = write(pair[0], &byte, 1)
          return (written, errno)
        }
        close(pair[0])
        var mask = sigset_t()
        pthread_sigmask(SIG_SETMASK, nil, &mask)
        var pending = sigset_t()
        sigpending(&pending)
        let result: Int32 =
          written != -1 || code != EPIPE
          ? 92 : sigismember(&mask, SIGPIPE) != 0 ? 93 : sigismember(&pending, SIGPIPE) != 0 ? 94 : 0
        status.withLock { $0 = result }
      }
      thread.start()
      done.wait()
      exit(status.load())
    }
  }
}
