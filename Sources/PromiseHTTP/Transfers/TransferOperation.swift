import Foundation
import Promises

/// What a transfer is doing, for its idle timer.
enum TransferActivity: Equatable {
  /// Its first attempt is not sent yet (it waits for a connection slot): not idle.
  case waiting
  /// It last showed life (an attempt sent, bytes sent, a head, bytes received) this long ago.
  case idle(Duration)
  /// It has ended.
  case ended
}

/// The side of a transfer (a download's file, an upload's body) that a `TransferOperation`
/// watches and ends: it says when the transfer last showed life and turns the request's outcome
/// into the transfer's.
protocol TransferSubject: AnyObject, Sendable {
  /// What the transfer settles with.
  associatedtype Value: Sendable
  /// What the transfer is doing at `now`, on the client's clock.
  func activity(at now: Duration) -> TransferActivity
  /// The request succeeded with `response`: calls `settle` with the transfer's value, or the
  /// error it fails with, once the transfer's last progress update is delivered.
  func complete(_ response: HTTPResponse, then settle: @escaping @Sendable (Result<Value, any Error>) -> Void)
  /// The transfer ends without a value: the request failed, the idle timer fired, or
  /// (`cancelled`) its promise was cancelled, perhaps after `complete`.
  func abandon(cancelled: Bool)
  /// The error the transfer fails with when its request failed with `error` (after `abandon`).
  func failure(for error: any Error) -> any Error
}

/// One transfer (`HTTPClient.download`, `HTTPClient.upload`): settles its promise from the
/// request's outcome, runs the idle timer, and ends its `TransferSubject` exactly once, whatever
/// ends the transfer first — the request's outcome, the idle timer, or a cancellation of the
/// promise.
///
/// The idle timer is the client's `timeout`: the transfer fails with `HTTPError.timedOut` once
/// the subject has shown no life for that long, while the request itself runs under its own
/// deadline only (`RequestStateMachine.Settings.timeout` set to `.endOfTime`).
final class TransferOperation<Subject: TransferSubject>: Sendable {
  private struct State {
    /// The request's promise, cancelled when the transfer ends first; released at the end.
    var request: Promise<HTTPResponse>?
    var timer: (any ScheduledWork)?
    var ended = false
  }

  private let subject: Subject
  private let resolver: Promise<Subject.Value>.Resolver
  private let state = LockedBox(State())
  /// The longest the transfer may show no life: the client's `timeout`.
  private let idleTimeout: Duration
  private let scheduler: any PromiseScheduler
  private let queue: DispatchQueue
  private let errorURL: URL?

  init(
    subject: Subject, resolver: Promise<Subject.Value>.Resolver, idleTimeout: Duration,
    scheduler: any PromiseScheduler, queue: DispatchQueue, errorURL: URL?
  ) {
    self.subject = subject
    self.resolver = resolver
    self.idleTimeout = idleTimeout
    self.scheduler = scheduler
    self.queue = queue
    self.errorURL = errorURL
  }

  /// Follows `request`, the promise of the transfer's request, and starts the idle timer.
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
      subject.complete(response) { [resolver] in resolver.resolve($0) }
    case .failure(let error):
      subject.abandon(cancelled: false)
      resolver.reject(subject.failure(for: error))
    }
  }

  /// The promise was cancelled: the request stops, and the subject with it.
  private func cancelled() {
    let ending = end()
    // Also after the request's outcome: a download's completed file is undone.
    subject.abandon(cancelled: true)
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
    switch subject.activity(at: scheduler.now) {
    case .ended:
      return
    case .waiting:
      armIdleTimer(after: idleTimeout)
    case .idle(let idle) where idle < idleTimeout:
      armIdleTimer(after: idleTimeout - idle)
    case .idle:
      guard let ending = end() else { return }
      subject.abandon(cancelled: false)
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
