import Dispatch
import Foundation

/// Signals a semaphore when the promise it is registered on settles.
final class SignalNode: _PromiseNode, @unchecked Sendable {
  // Safety: `semaphore` is immutable and thread-safe.
  let semaphore = DispatchSemaphore(value: 0)

  init() { super.init(queue: nil) }

  override func fire() {
    semaphore.signal()
  }
}

/// Marks queues so `wait` can tell whether it is running on one of them.
enum QueueIdentity {
  static let key = DispatchSpecificKey<UInt>()

  static func isCurrent(_ queue: DispatchQueue) -> Bool {
    if Drain.isDraining(queue) { return true }
    if queue === DispatchQueue.main && Thread.isMainThread { return true }
    let identity = UInt(bitPattern: ObjectIdentifier(queue).hashValue)
    if queue.getSpecific(key: key) != identity {
      // Global queues ignore specifics; any other queue keeps this mark from now on.
      queue.setSpecific(key: key, value: identity)
    }
    return DispatchQueue.getSpecific(key: key) == identity
  }
}

extension Promise {
  /// Blocks the calling thread until the promise settles, for at most `timeout` seconds.
  ///
  /// Meant for command-line tools, scripts and tests; in an app or on a server, chain with
  /// `then` or use `try await promise.value`, which block nothing. Never call it on the main
  /// thread of an app.
  ///
  /// - Parameter timeout: The longest time to wait, in seconds.
  /// - Returns: The value, if the promise is fulfilled in time.
  /// - Throws: The rejection error; `PromiseError.timedOut` when time is up first (the
  ///   promise itself is left pending); `PromiseError.waitWouldDeadlock` when called on a
  ///   queue that the promise still needs to settle (a callback queue of the pending chain),
  ///   where blocking would deadlock.
  public func wait(timeout: Double) throws -> Value {
    try wait(timeout: .nanoseconds(Int64((max(0, timeout) * 1e9).rounded(.down))))
  }

  /// Blocks the calling thread until the promise settles, for at most `timeout`.
  ///
  /// See `wait(timeout:)` taking seconds.
  public func wait(timeout: Duration) throws -> Value {
    if let result { return try result.get() }
    try checkWaitWouldNotDeadlock()
    let node = SignalNode()
    register(node)
    let (seconds, attoseconds) = timeout.components
    let nanoseconds = Double(seconds) * 1e9 + Double(attoseconds) / 1e9
    let deadline: DispatchTime =
      nanoseconds >= Double(Int64.max / 2) ? .distantFuture : .now() + .nanoseconds(Int(nanoseconds))
    if node.semaphore.wait(timeout: deadline) == .timedOut, isPending {
      throw PromiseError.timedOut(after: timeout, createdAt: creationSite)
    }
    guard let result else {
      preconditionFailure("Promises: wait woke up before the promise settled")
    }
    return try result.get()
  }

  /// Throws if the calling thread is running a queue that a pending link of this chain needs.
  private func checkWaitWouldNotDeadlock() throws {
    var node: _PromiseNode? = self
    var steps = 0
    var checked: DispatchQueue?
    while let current = node, steps < 1_000 {
      let (pending, queue, upstream) = current.waitInspection()
      guard pending else { return }
      // A chain usually runs on one queue: check each run of the same queue once.
      if let queue, queue !== checked {
        if QueueIdentity.isCurrent(queue) {
          throw PromiseError.waitWouldDeadlock(queue: queue.label, createdAt: creationSite)
        }
        checked = queue
      }
      node = upstream
      steps += 1
    }
  }
}
