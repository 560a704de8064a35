import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A `URLSession` task made, resumed and cancelled on a queue of the transport's, so that a
/// request started or cancelled from `async` code does not wait for FoundationNetworking.
///
/// FoundationNetworking (Swift 6.3.1) runs `dataTask(with:)`, `resume()` and `cancel()` with
/// a `sync` onto the work queue that every task of every session shares, and that queue is busy
/// while libcurl moves bodies. Called from `async` code, that `sync` holds a thread of the
/// cooperative pool — of which a 2-core machine has two — until the queue gets to it: stack
/// samples of the test suite caught both pool threads of the process waiting there at once,
/// and the tasks waiting for a pool thread stalled with them. From a task, the caller only
/// queues the work and the transport's serial queue waits instead. From anything else (a
/// promise callback on a Dispatch queue, a thread) the work runs on the caller's thread through
/// `sync` on the same queue, as it ran before: a hop to another thread there costs a thread
/// wake-up per request (`http` benchmark: 1.01× → 1.07× raw URLSession with a hop always) and
/// spares no pool thread.
///
/// Order is kept: `resume()` and `cancel()` run in the order they were called (one serial
/// queue), so a cancellation that follows a start stops the task it started, and one that
/// comes first means the `URLSession` task is never made. A cancellation only ever runs later
/// than it would have run inline, so an answer to a redirect given before it still reaches
/// FoundationNetworking first (see `Exchange.redirect`).
final class SessionTask: ExchangeTask {
  private enum State {
    /// Not made yet: what it will be registered with.
    case waiting(Exchange?)
    case made(URLSessionTask)
    /// Cancelled before it was made, or made and cancelled: nothing more to do.
    case ended
  }

  /// Touched only on `queue` but for `attach`, which precedes `resume()`; a lock makes that
  /// visible to the compiler as well.
  private let state = LockedBox(State.waiting(nil))
  private let queue: DispatchQueue
  private let delegate: SessionDelegate
  private let make: @Sendable () -> URLSessionTask

  /// A task that `make` will create on `queue` when it is resumed.
  init(queue: DispatchQueue, delegate: SessionDelegate, make: @escaping @Sendable () -> URLSessionTask) {
    self.queue = queue
    self.delegate = delegate
    self.make = make
  }

  /// Names the exchange the task's events go to, before it is resumed.
  ///
  /// Held until the task is made (then the session's delegate holds it) or cancelled.
  func attach(_ exchange: Exchange) {
    state.withLock { $0 = .waiting(exchange) }
  }

  func resume() {
    run { [self] in
      guard case .waiting(let exchange) = state.load() else { return }
      let task = make()
      if let exchange { delegate.add(exchange, for: task) }
      state.withLock { $0 = .made(task) }
      task.resume()
    }
  }

  func cancel() {
    run { [self] in
      let task: URLSessionTask? = state.withLock { state in
        defer { state = .ended }
        if case .made(let task) = state { return task }
        return nil
      }
      task?.cancel()
    }
  }

  /// Runs `work` on the queue: queued when called from a task, else on this thread (`sync`).
  private func run(_ work: @escaping @Sendable () -> Void) {
    if withUnsafeCurrentTask(body: { $0 != nil }) {
      queue.async(execute: work)
    } else {
      queue.sync(execute: work)
    }
  }
}
