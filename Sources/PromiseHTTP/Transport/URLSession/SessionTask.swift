import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A `URLSession` task made and resumed on the caller's thread, and cancelled later on a
/// serial queue of the transport's: a cancellation never waits for FoundationNetworking.
///
/// FoundationNetworking (Swift 6.3.1) runs `dataTask(with:)`, `resume()` and `cancel()` with a
/// `sync` onto a work queue every session of the process shares, and that queue can be busy for
/// seconds with one response (a body of 1-byte chunks, a long trailer section). A cancellation
/// comes from a deadline's timer or a cancelled promise on the client's queue, which must not
/// wait there: it takes the task from the state at once (so nothing made later escapes it) and
/// queues the `cancel()` on the transport's queue, without waiting. Making and resuming still
/// run on the caller's thread through the same queue (`sync`), so a cancellation queued after a
/// start runs after it. Queuing the start too was tried and withdrawn: a CI run under
/// ThreadSanitizer then stopped in FoundationNetworking ("Trying to access a behaviour for a
/// task that in not in the registry", 1 run of 4, cause not found).
///
/// A cancellation that comes before the task is made means it is never made; one that comes
/// while it is being made cancels it as soon as it is.
final class SessionTask: ExchangeTask {
  /// Where the task is in its life, as a value: events in, what to do out.
  struct Machine {
    enum State {
      /// Not made yet: what it will be registered with.
      case waiting(Exchange?)
      /// `resume()` is making it.
      case making
      /// Cancelled while `resume()` was making it.
      case cancelledWhileMaking
      case made(URLSessionTask)
      /// Cancelled before it was made, or made and cancelled: nothing more to do.
      case ended
    }

    private(set) var state = State.waiting(nil)

    /// Names the exchange the task will be registered with.
    mutating func attach(_ exchange: Exchange) {
      if case .waiting = state { state = .waiting(exchange) }
    }

    /// `resume()` starts: whether to make the task, and the exchange to register it with.
    mutating func resumeStarted() -> (makes: Bool, exchange: Exchange?) {
      guard case .waiting(let exchange) = state else { return (false, nil) }
      state = .making
      return (true, exchange)
    }

    /// `resume()` made `task`: whether to resume it; if not, it was cancelled meanwhile, and
    /// `resume()` cancels it.
    mutating func made(_ task: URLSessionTask) -> Bool {
      guard case .making = state else {
        state = .ended
        return false
      }
      state = .made(task)
      return true
    }

    /// `cancel()`: the task to cancel, if one was made and not cancelled yet.
    mutating func cancelled() -> URLSessionTask? {
      switch state {
      case .waiting, .ended:
        state = .ended
        return nil
      case .making:
        state = .cancelledWhileMaking
        return nil
      case .cancelledWhileMaking:
        return nil
      case .made(let task):
        state = .ended
        return task
      }
    }
  }

  private let machine = LockedBox(Machine())
  private let queue: DispatchQueue
  private let delegate: SessionDelegate
  private let make: @Sendable () -> URLSessionTask

  /// A task that `make` will create, through `queue`, when it is resumed.
  init(queue: DispatchQueue, delegate: SessionDelegate, make: @escaping @Sendable () -> URLSessionTask) {
    self.queue = queue
    self.delegate = delegate
    self.make = make
  }

  /// Names the exchange the task's events go to, before it is resumed.
  ///
  /// Held until the task is made (then the session's delegate holds it) or cancelled.
  func attach(_ exchange: Exchange) {
    machine.withLock { $0.attach(exchange) }
  }

  /// Makes and resumes the task on this thread, through the queue (`sync`), unless it was
  /// cancelled first.
  func resume() {
    queue.sync {
      let (makes, exchange) = machine.withLock { $0.resumeStarted() }
      guard makes else { return }
      let task = make()
      if let exchange { delegate.add(exchange, for: task) }
      if machine.withLock({ $0.made(task) }) {
        task.resume()
      } else {
        task.cancel()
      }
    }
  }

  /// Cancels the task without waiting: its `cancel()` is queued, after any start in progress.
  func cancel() {
    guard let task = machine.withLock({ $0.cancelled() }) else { return }
    queue.async { task.cancel() }
  }
}
