import Foundation

/// A stand-in for async work that waits until it is cancelled, and says so.
final class EventSource: @unchecked Sendable {
  // Safety: `cancelled` and `continuation` are only accessed while `lock` is held.
  private let lock = NSLock()
  private var cancelled = false
  private var continuation: CheckedContinuation<String, any Error>?
  private let log: @Sendable (Any) -> Void

  init(log: @escaping @Sendable (Any) -> Void) {
    self.log = log
  }

  /// Suspends until the calling task is cancelled, then throws `CancellationError`.
  func next() async throws -> String {
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        lock.lock()
        if cancelled {
          lock.unlock()
          continuation.resume(throwing: CancellationError())
        } else {
          self.continuation = continuation
          lock.unlock()
        }
      }
    } onCancel: {
      lock.lock()
      cancelled = true
      let waiting = continuation
      continuation = nil
      lock.unlock()
      log("event source: task cancelled")
      waiting?.resume(throwing: CancellationError())
    }
  }
}
