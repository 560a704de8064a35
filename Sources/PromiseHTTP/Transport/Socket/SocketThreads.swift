import Foundation
import Promises

/// The threads the socket transport's tasks run on: one per task in flight, each kept for a
/// while once idle and given the next task, so that a request does not pay for a new thread.
///
/// A socket task blocks its thread on the socket for the whole exchange, so a task needs a
/// thread of its own while it runs; the number of threads is the number of requests in flight
/// (bounded by the clients' per-origin limits), not the number of requests sent. An idle thread
/// waits `idleLifetime` for work, then ends; at most `maximumIdle` wait at once.
final class SocketThreads: Sendable {
  /// The threads of every client of the process.
  static let shared = SocketThreads()

  /// One thread's hand-over slot.
  private final class Worker: @unchecked Sendable {
    // Safety of `@unchecked Sendable`: `work` is read and written only while `condition` is
    // locked; the worker's thread takes it, and `SocketThreads.run` puts it there.
    let condition = NSCondition()
    var work: (@Sendable () -> Void)?
  }

  /// The idle workers, most recently idle last (a warm one is taken first).
  private let idle = LockedBox<[Worker]>([])
  /// How long an idle thread waits for work before it ends.
  let idleLifetime: TimeInterval
  /// The most idle threads kept.
  let maximumIdle: Int

  init(idleLifetime: TimeInterval = 10, maximumIdle: Int = 64) {
    self.idleLifetime = idleLifetime
    self.maximumIdle = maximumIdle
  }

  /// The number of threads waiting for work.
  var idleCount: Int { idle.withLock { $0.count } }

  /// Runs `work` on an idle thread, or on a new one when none is idle.
  func run(_ work: @escaping @Sendable () -> Void) {
    if let worker = idle.withLock({ $0.popLast() }) {
      worker.condition.lock()
      worker.work = work
      worker.condition.signal()
      worker.condition.unlock()
      return
    }
    let worker = Worker()
    worker.work = work
    let thread = Thread { [self] in
      Self.blockBrokenPipeSignal()
      loop(worker)
    }
    thread.name = "PromiseHTTP.socket"
    thread.start()
  }

  /// Blocks SIGPIPE on the calling thread, for the rest of its life.
  ///
  /// OpenSSL writes to its socket with `write`, which raises SIGPIPE (by default the end of the
  /// process) when the peer has reset the connection: an HTTPS upload to a server that dropped
  /// it killed the process in 1 run of 3. The transport's own sends pass `MSG_NOSIGNAL`, but
  /// OpenSSL's socket BIO has no such flag. Blocked, the signal raised by a write stays pending
  /// on this thread (a write's SIGPIPE is directed at the thread that wrote) and the write fails
  /// with EPIPE, which the transport reports as a lost connection; these threads never unblock
  /// it, so it is never delivered.
  private static func blockBrokenPipeSignal() {
    #if canImport(Glibc)
      var signals = sigset_t()
      sigemptyset(&signals)
      sigaddset(&signals, SIGPIPE)
      pthread_sigmask(SIG_BLOCK, &signals, nil)
    #endif
  }

  /// Runs `body` with SIGPIPE blocked on the calling thread, and drops a SIGPIPE that `body`
  /// raised there; the thread's signal mask is then as it was.
  ///
  /// For a write through OpenSSL (which cannot pass `MSG_NOSIGNAL`) on a thread that is not
  /// one of these: a socket closed by the connection pool, on whatever thread lets go of it.
  /// On a thread that blocks SIGPIPE already (these), `body` just runs.
  static func withBrokenPipeSignalHeld<T>(_ body: () -> T) -> T {
    #if canImport(Glibc)
      var pipeOnly = sigset_t()
      sigemptyset(&pipeOnly)
      sigaddset(&pipeOnly, SIGPIPE)
      var previous = sigset_t()
      guard pthread_sigmask(SIG_BLOCK, &pipeOnly, &previous) == 0, sigismember(&previous, SIGPIPE) == 0 else {
        return body()
      }
      let result = body()
      var pending = sigset_t()
      if sigpending(&pending) == 0, sigismember(&pending, SIGPIPE) == 1 {
        var none = timespec(tv_sec: 0, tv_nsec: 0)
        _ = sigtimedwait(&pipeOnly, nil, &none)
      }
      pthread_sigmask(SIG_SETMASK, &previous, nil)
      return result
    #else
      return body()
    #endif
  }

  /// Takes the worker's work and runs it; the closure (and what it holds: a task, its
  /// exchange, the client's transport) is released on return, not kept while the thread idles.
  private func runWork(of worker: Worker) {
    worker.condition.lock()
    let work = worker.work
    worker.work = nil
    worker.condition.unlock()
    work?()
  }

  /// A worker's life: run its work, wait idle for more, end when none comes in time.
  private func loop(_ worker: Worker) {
    while true {
      runWork(of: worker)
      // Idle: offered to the next `run`, unless enough threads wait already.
      let kept = idle.withLock { idle in
        guard idle.count < maximumIdle else { return false }
        idle.append(worker)
        return true
      }
      guard kept else { return }
      let deadline = Date(timeIntervalSinceNow: idleLifetime)
      worker.condition.lock()
      while worker.work == nil {
        guard worker.condition.wait(until: deadline) else { break }
      }
      let hasWork = worker.work != nil
      worker.condition.unlock()
      if hasWork { continue }
      // Timed out: leave the idle list, unless `run` took the worker meanwhile and its work is
      // on the way.
      let left = idle.withLock { idle in
        guard let index = idle.firstIndex(where: { $0 === worker }) else { return false }
        idle.remove(at: index)
        return true
      }
      if left { return }
      worker.condition.lock()
      while worker.work == nil { worker.condition.wait() }
      worker.condition.unlock()
    }
  }
}
