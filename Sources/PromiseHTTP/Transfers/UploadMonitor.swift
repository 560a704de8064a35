import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Follows one upload, for its idle timer and its progress: when it last showed life (an
/// attempt sent, body bytes sent, response bytes received), the bytes the current task has
/// sent, and the last progress update when the request is fulfilled.
final class UploadMonitor: UploadObserver, TransferSubject {
  private struct State {
    /// The bytes the current task has sent.
    var sent: Int64 = 0
    /// When the upload last showed life, on the client's clock; `nil` before its first attempt
    /// is sent.
    var lastActivity: Duration?
    var ended = false
  }

  private let reporter: ProgressReporter?
  private let expected: Int64?
  private let scheduler: any PromiseScheduler
  private let state = LockedBox(State())
  /// libcurl's idle timeout, a backstop behind the client's own (`URLRequest.timeoutInterval`).
  private let transportIdleTimeout: TimeInterval

  init(
    reporter: ProgressReporter?, expected: Int64?, scheduler: any PromiseScheduler, idleTimeout: Duration
  ) {
    self.reporter = reporter
    self.expected = expected
    self.scheduler = scheduler
    self.transportIdleTimeout = RequestStateMachine.transportTimeoutInterval(remaining: idleTimeout)
  }

  private func noteActivity() {
    let now = scheduler.now
    state.withLock { $0.lastActivity = now }
  }

  // MARK: UploadObserver

  func prepare(_ request: URLRequest) -> URLRequest {
    noteActivity()
    var request = request
    // FoundationNetworking's `timeoutInterval` is an idle timeout (its timer restarts on every
    // callback of libcurl, the reads of the body included): kept just beyond the client's own,
    // which comes first.
    request.timeoutInterval = transportIdleTimeout
    return request
  }

  func sent(totalBytes: Int64) {
    let now = scheduler.now
    state.withLock { state in
      state.sent = totalBytes
      state.lastActivity = now
    }
    reporter?.update(completed: totalBytes, expected: expected)
  }

  func received() {
    noteActivity()
  }

  func requestFinished(succeeded: Bool, then settle: @escaping @Sendable () -> Void) {
    guard let reporter else { return settle() }
    if succeeded {
      reporter.finish(completed: state.withLock { $0.sent }, expected: expected, then: settle)
    } else {
      reporter.abandon()
      settle()
    }
  }

  // MARK: TransferSubject

  func activity(at now: Duration) -> TransferActivity {
    state.withLock { state in
      guard !state.ended else { return .ended }
      return state.lastActivity.map { .idle(now - $0) } ?? .waiting
    }
  }

  func complete(
    _ response: HTTPResponse, then settle: @escaping @Sendable (Result<HTTPResponse, any Error>) -> Void
  ) {
    state.withLock { $0.ended = true }
    settle(.success(response))
  }

  func abandon(cancelled: Bool) {
    // The request's own end reports the progress (`requestFinished`).
    state.withLock { $0.ended = true }
  }

  func failure(for error: any Error) -> any Error {
    error
  }
}
