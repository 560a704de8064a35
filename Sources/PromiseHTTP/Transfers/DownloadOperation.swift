import Foundation
import Promises

/// One call of `HTTPClient.download`: settles its promise from the request's outcome, runs the
/// idle timer, and ends the `DownloadSink` exactly once, whatever ends the download first —
/// the request's outcome, the idle timer, or a cancellation of the promise.
final class DownloadOperation: Sendable {
  private struct State {
    /// The request's promise, cancelled when the download ends first; released at the end.
    var request: Promise<HTTPResponse>?
    var timer: (any ScheduledWork)?
    var ended = false
  }

  private let sink: DownloadSink
  private let resolver: Promise<HTTPDownload>.Resolver
  private let state = LockedBox(State())
  /// The longest the download may show no life: the client's `timeout`.
  private let idleTimeout: Duration
  private let scheduler: any PromiseScheduler
  private let queue: DispatchQueue
  private let errorURL: URL?

  init(
    sink: DownloadSink, resolver: Promise<HTTPDownload>.Resolver, idleTimeout: Duration,
    scheduler: any PromiseScheduler, queue: DispatchQueue, errorURL: URL?
  ) {
    self.sink = sink
    self.resolver = resolver
    self.idleTimeout = idleTimeout
    self.scheduler = scheduler
    self.queue = queue
    self.errorURL = errorURL
  }

  /// Follows `request`, the promise of the download's request, and starts the idle timer.
  func start(_ request: Promise<HTTPResponse>) {
    state.withLock { $0.request = request }
    _ = request.whenSettled(on: queue) { [self] result in requestSettled(result) }
    armIdleTimer(after: idleTimeout)
    resolver.onCancel { [self] in cancelled() }
  }

  private func requestSettled(_ result: Result<HTTPResponse, any Error>) {
    guard let ending = end() else { return }
    ending.timer?.cancel()
    switch result {
    case .success(let response):
      resolver.resolve(sink.complete(response))
    case .failure(let error):
      sink.abandon(undoingCompletion: false)
      resolver.reject(sink.fileError ?? error)
    }
  }

  /// The promise was cancelled: the request stops, the file goes.
  private func cancelled() {
    let ending = end()
    // After the request's outcome, a completed file is undone: a cancelled promise leaves no file.
    sink.abandon(undoingCompletion: true)
    ending?.timer?.cancel()
    ending?.request?.cancel()
  }

  private func armIdleTimer(after delay: Duration) {
    let timer = scheduler.schedule(after: delay, on: queue) { [weak self] in self?.idleTimerFired() }
    let stale: (any ScheduledWork)? = state.withLock { state in
      guard !state.ended else { return timer }
      state.timer = timer
      return nil
    }
    stale?.cancel()
  }

  private func idleTimerFired() {
    switch sink.activity(at: scheduler.now) {
    case .ended:
      return
    case .waiting:
      armIdleTimer(after: idleTimeout)
    case .idle(let idle) where idle < idleTimeout:
      armIdleTimer(after: idleTimeout - idle)
    case .idle:
      guard let ending = end() else { return }
      sink.abandon(undoingCompletion: false)
      resolver.reject(HTTPError.timedOut(url: errorURL, deadline: idleTimeout))
      ending.request?.cancel()
    }
  }

  /// What ending the operation leaves to stop.
  private struct Ending {
    var timer: (any ScheduledWork)?
    var request: Promise<HTTPResponse>?
  }

  /// Ends the operation once: returns what to stop, or `nil` when it had ended already.
  private func end() -> Ending? {
    state.withLock { state in
      guard !state.ended else { return nil }
      state.ended = true
      defer {
        state.timer = nil
        state.request = nil
      }
      return Ending(timer: state.timer, request: state.request)
    }
  }
}
