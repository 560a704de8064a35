import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One call of `HTTPClient.send`: attempts, token, retries and the deadline, settling one promise.
///
/// The steps are: get a token (if there is an authenticator) → run an exchange → on a 401,
/// refresh the token once and replay → on a retryable failure, wait the backoff and start
/// again → settle. The deadline timer covers all of it. Whatever ends the operation first
/// (the outcome, the deadline, the promise's cancellation) wins; everything else is cancelled
/// and delivers nothing.
final class RequestOperation: @unchecked Sendable {
  // Safety of `@unchecked Sendable`: every `var` is read and written only while `lock` is held;
  // the `let`s are constants of `Sendable` types.
  private let lock = NSLock()
  private let transport: Transport
  private let request: URLRequest
  private let method: HTTPMethod
  private let policy: RetryPolicy
  private let acceptable: Range<Int>
  private let deadline: Deadline
  private let authenticator: TokenAuthenticator?
  private let maximumBodySize: Int
  private let redirectPolicy: RedirectPolicy
  private let sensitiveHeaders: HeaderNameSet
  private let timerQueue: DispatchQueue

  private var resolver: Promise<HTTPResponse>.Resolver?
  private var exchange: Exchange?
  private var timers: [DispatchWorkItem] = []
  private var attempts = 0
  private var refreshedToken = false
  private var finished = false

  init(
    transport: Transport, request: URLRequest, method: HTTPMethod, policy: RetryPolicy,
    acceptable: Range<Int>,
    deadline: Deadline, authenticator: TokenAuthenticator?, maximumBodySize: Int,
    redirectPolicy: RedirectPolicy, sensitiveHeaders: HeaderNameSet, timerQueue: DispatchQueue,
    resolver: Promise<HTTPResponse>.Resolver
  ) {
    self.transport = transport
    self.request = request
    self.method = method
    self.policy = policy
    self.acceptable = acceptable
    self.deadline = deadline
    self.authenticator = request.value(forHTTPHeaderField: "Authorization") == nil ? authenticator : nil
    self.maximumBodySize = maximumBodySize
    self.redirectPolicy = redirectPolicy
    self.sensitiveHeaders = sensitiveHeaders
    self.timerQueue = timerQueue
    self.resolver = resolver
  }

  private var url: URL { request.url! }

  /// Starts the deadline timer and the first attempt.
  func start() {
    // Weak: the work in flight keeps the operation alive, not a timer that may be far away.
    let timeout = DispatchWorkItem { [weak self] in
      guard let self else { return }
      finish(.failure(HTTPError.timedOut(url: Redaction.url(url), deadline: deadline.allowed)))
    }
    lock.lock()
    timers.append(timeout)
    lock.unlock()
    timerQueue.asyncAfter(deadline: deadline.instant, execute: timeout)
    nextAttempt()
  }

  /// Ends the operation for a cancelled promise: cancels the task and the timers.
  func cancel() {
    finish(.failure(CancellationError()))
  }

  private func nextAttempt() {
    lock.lock()
    attempts += 1
    lock.unlock()
    guard let authenticator else {
      send(token: nil)
      return
    }
    authenticator.token().whenSettled(on: timerQueue) { [self] result in
      switch result {
      case .success(let token): send(token: token)
      case .failure(let error): finish(.failure(error))
      }
    }
  }

  private func send(token: String?) {
    var request = self.request
    if let token, let authenticator {
      request.setValue(authenticator.headerValue(for: token), forHTTPHeaderField: "Authorization")
    }
    let remaining = deadline.remaining.seconds
    // libcurl's own timeout (whole seconds) is kept just beyond ours, which comes first.
    request.timeoutInterval = max(1, remaining.rounded(.up) + 1)
    lock.lock()
    guard !finished else {
      lock.unlock()
      return
    }
    // The exchange is stored before its completion can run: the lock is held across `start`.
    exchange = transport.start(
      request, maximumBodySize: maximumBodySize, redirectPolicy: redirectPolicy,
      sensitiveHeaders: sensitiveHeaders
    ) { [self] result in
      handle(result, token: token)
    }
    lock.unlock()
  }

  private func handle(_ result: Result<HTTPResponse, HTTPError>, token: String?) {
    lock.lock()
    exchange = nil
    let refresh = !refreshedToken && token != nil
    if case .success(let response) = result, response.statusCode == 401, refresh {
      refreshedToken = true
    }
    let attempts = self.attempts
    lock.unlock()
    switch result {
    case .success(let response):
      if response.statusCode == 401, refresh, let token, let authenticator {
        authenticator.token(replacing: token).whenSettled(on: timerQueue) { [self] result in
          switch result {
          case .success(let fresh): send(token: fresh)
          case .failure(let error): finish(.failure(error))
          }
        }
      } else if acceptable.contains(response.statusCode) {
        finish(.success(response))
      } else if policy.retryableStatusCodes.contains(response.statusCode) {
        retry(after: attempts, retryAfter: response.headers["Retry-After"], or: .unacceptable(response))
      } else {
        finish(.failure(HTTPError.unacceptable(response)))
      }
    case .failure(let error):
      if case .transport(let urlError, _) = error, policy.retryableErrorCodes.contains(urlError.code) {
        retry(after: attempts, retryAfter: nil, or: error)
      } else {
        finish(.failure(error))
      }
    }
  }

  /// Schedules the next attempt after the policy's delay, or finishes with `error` if none fits.
  private func retry(after attempts: Int, retryAfter: String?, or error: HTTPError) {
    guard policy.allowsRetry(of: method),
      let delay = policy.delay(beforeRetry: attempts, retryAfter: retryAfter),
      DispatchTime.now() + delay.dispatchInterval < deadline.instant
    else {
      finish(.failure(error))
      return
    }
    let next = DispatchWorkItem { [self] in nextAttempt() }
    lock.lock()
    guard !finished else {
      lock.unlock()
      return
    }
    timers.append(next)
    lock.unlock()
    timerQueue.asyncAfter(deadline: .now() + delay.dispatchInterval, execute: next)
  }

  /// Settles the promise once; cancels the exchange and the timers.
  private func finish(_ result: Result<HTTPResponse, any Error>) {
    lock.lock()
    guard !finished else {
      lock.unlock()
      return
    }
    finished = true
    let exchange = self.exchange
    let timers = self.timers
    let resolver = self.resolver
    self.exchange = nil
    self.timers = []
    self.resolver = nil
    lock.unlock()
    exchange?.cancel()
    for timer in timers { timer.cancel() }
    resolver?.resolve(result)
  }
}
