import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A `URLSession` task made, resumed and cancelled on a queue of the transport's, never on the
/// thread that starts or cancels the request.
///
/// FoundationNetworking (Swift 6.3.1) runs `dataTask(with:)`, `resume()` and `cancel()` with
/// a `sync` onto the work queue that every task of the session shares, and that queue is busy
/// while libcurl moves bodies. Called from `async` code, that `sync` holds a thread of the
/// cooperative pool — of which a 2-core machine has two — until the queue gets to it: stack
/// samples of the test suite caught both pool threads of the process waiting there at once,
/// and the tasks waiting for a pool thread stalled with them. Here the caller only queues the
/// work; the transport's serial queue waits instead.
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
    queue.async { [self] in
      guard case .waiting(let exchange) = state.load() else { return }
      let task = make()
      if let exchange { delegate.add(exchange, for: task) }
      state.withLock { $0 = .made(task) }
      task.resume()
    }
  }

  func cancel() {
    queue.async { [self] in
      let task: URLSessionTask? = state.withLock { state in
        defer { state = .ended }
        if case .made(let task) = state { return task }
        return nil
      }
      task?.cancel()
    }
  }
}
