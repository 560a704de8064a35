import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One call of `HTTPClient.send`: queueing, attempts, token, retries and the deadline, settling
/// one promise.
///
/// The steps are: wait in the client's `RequestQueue` for a slot of the origin → start the
/// deadline → get a token (if there is an authenticator) → run an exchange → on a 401, refresh
/// the token once and replay → on a retryable failure, wait the backoff and start again →
/// settle and free the slot. The slot is held for the whole operation, retries and backoff
/// included; the deadline timer covers everything after the queue. Whatever ends the operation
/// first (the outcome, the deadline, the queue wait limit, the promise's cancellation) wins;
/// everything else is cancelled and delivers nothing.
final class RequestOperation: @unchecked Sendable {
  // Safety of `@unchecked Sendable`: every `var` is read and written only while `lock` is held;
  // the `let`s are constants of `Sendable` types.
  private let lock = NSLock()
  private let transport: Transport
  private let request: URLRequest
  private let method: HTTPMethod
  private let policy: RetryPolicy
  private let acceptable: Range<Int>
  private let timeout: Duration
  private let requestDeadline: Deadline?
  private let queue: RequestQueue
  private let queueKey: RequestQueueKey
  private let maximumQueueWait: Duration
  private let authenticator: TokenAuthenticator?
  private let maximumBodySize: Int
  private let redirectPolicy: RedirectPolicy
  private let sensitiveHeaders: HeaderNameSet
  private let timerQueue: DispatchQueue

  private var resolver: Promise<HTTPResponse>.Resolver?
  /// Set when the operation leaves the queue: `timeout` from then, or the request's own
  /// deadline if that is earlier.
  private var deadline = Deadline.distantFuture
  /// Set while the operation waits in the queue.
  private var ticket: RequestQueueTicket?
  /// Whether the operation holds a slot of `queue`, which `finish` must release.
  private var holdsSlot = false
  private var exchange: Exchange?
  private var timers: [DispatchWorkItem] = []
  private var attempts = 0
  private var refreshedToken = false
  private var finished = false

  init(
    transport: Transport, request: URLRequest, method: HTTPMethod, policy: RetryPolicy,
    acceptable: Range<Int>, timeout: Duration, deadline: Deadline?, queue: RequestQueue,
    maximumQueueWait: Duration, authenticator: TokenAuthenticator?, maximumBodySize: Int,
    redirectPolicy: RedirectPolicy, sensitiveHeaders: HeaderNameSet, timerQueue: DispatchQueue,
    resolver: Promise<HTTPResponse>.Resolver
  ) {
    self.transport = transport
    self.request = request
    self.method = method
    self.policy = policy
    self.acceptable = acceptable
    self.timeout = timeout
    self.requestDeadline = deadline
    self.queue = queue
    self.queueKey = RequestQueueKey(request.url!)
    self.maximumQueueWait = maximumQueueWait
    self.authenticator = request.value(forHTTPHeaderField: "Authorization") == nil ? authenticator : nil
    self.maximumBodySize = maximumBodySize
    self.redirectPolicy = redirectPolicy
    self.sensitiveHeaders = sensitiveHeaders
    self.timerQueue = timerQueue
    self.resolver = resolver
  }

  private var url: URL { request.url! }

  /// The deadline set by `start()`.
  private var currentDeadline: Deadline {
    lock.lock()
    defer { lock.unlock() }
    return deadline
  }

  /// Starts the operation at once if its origin has a free slot, else queues it until one frees.
  ///
  /// A queued operation ends with `HTTPError.queueWaitExceeded` when `maximumQueueWait` passes
  /// first, or with `HTTPError.timedOut` when the request's own `Deadline` does; either way
  /// nothing was sent.
  func enqueue() {
    // The queue's strong reference keeps a waiting operation alive; it goes when it leaves.
    guard let ticket = queue.enqueue(queueKey, start: { [self] in start() }) else { return }
    let waitLimit = Deadline.after(maximumQueueWait)
    let end = requestDeadline.map { min($0, waitLimit) } ?? waitLimit
    // Weak: a queued operation is kept alive by the queue, not by a timer that may be far away.
    let expiry = DispatchWorkItem { [weak self] in self?.expire(ticket, deadlinePassed: end < waitLimit) }
    lock.lock()
    guard !finished, !holdsSlot else {
      // Started (and maybe finished) by a release on another thread before `enqueue` returned.
      lock.unlock()
      return
    }
    self.ticket = ticket
    timers.append(expiry)
    lock.unlock()
    timerQueue.asyncAfter(deadline: end.instant, execute: expiry)
  }

  /// Ends a queued operation whose wait is over; does nothing if it has left the queue.
  private func expire(_ ticket: RequestQueueTicket, deadlinePassed: Bool) {
    guard queue.remove(ticket) else { return }
    let url = Redaction.url(url)
    if deadlinePassed, let requestDeadline {
      finish(.failure(HTTPError.timedOut(url: url, deadline: requestDeadline.allowed)))
    } else {
      finish(.failure(HTTPError.queueWaitExceeded(limit: maximumQueueWait, url: url)))
    }
  }

  /// Takes the slot the queue gave, starts the deadline timer and the first attempt.
  private func start() {
    let deadline = requestDeadline.map { min($0, .after(timeout)) } ?? .after(timeout)
    // Weak: the work in flight keeps the operation alive, not a timer that may be far away.
    let expiry = DispatchWorkItem { [weak self] in
      guard let self else { return }
      finish(.failure(HTTPError.timedOut(url: Redaction.url(url), deadline: deadline.allowed)))
    }
    lock.lock()
    guard !finished else {
      // Cancelled between leaving the queue and starting: give the slot back at once.
      lock.unlock()
      queue.release(queueKey)
      return
    }
    holdsSlot = true
    ticket = nil
    self.deadline = deadline
    timers.append(expiry)
    lock.unlock()
    timerQueue.asyncAfter(deadline: deadline.instant, execute: expiry)
    nextAttempt()
  }

  /// Ends the operation for a cancelled promise: takes it out of the queue, or cancels the task
  /// and the timers.
  func cancel() {
    lock.lock()
    let ticket = self.ticket
    lock.unlock()
    if let ticket { _ = queue.remove(ticket) }
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
    let remaining = currentDeadline.remaining.secondsValue
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
      delay.dispatchDeadline < currentDeadline.instant
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
    timerQueue.asyncAfter(deadline: delay.dispatchDeadline, execute: next)
  }

  /// Settles the promise once; cancels the exchange and the timers, and frees the queue slot.
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
    let release = holdsSlot
    self.exchange = nil
    self.timers = []
    self.resolver = nil
    self.ticket = nil
    holdsSlot = false
    lock.unlock()
    exchange?.cancel()
    for timer in timers { timer.cancel() }
    // The slot first, so the next request is on its way before callbacks run.
    if release { queue.release(queueKey) }
    resolver?.resolve(result)
  }
}
