import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

extension Exchange: RequestCancellable {}

/// A body sink that hands the body to a reader as it arrives (a streamed response): once it
/// takes a response, the request is committed to it (`RequestStateMachine.committed`).
protocol CommittingBodySink: ResponseBodySink {
  /// Receives, once before the first attempt, what the sink calls (at most once, from `begin`)
  /// when it takes the response of the current exchange.
  func attach(commit: @escaping @Sendable () -> Void)
}

/// One call of `HTTPClient.send`: runs the actions of a `RequestStateMachine` and feeds back
/// what happens, settling one promise.
///
/// The machine decides everything (queue wait, deadline, steps, exchanges, backoff, the end);
/// this class only keeps it under a lock and does the I/O it asks for after unlocking: the
/// `RequestQueue`, the timers on the client's `PromiseScheduler`, the steps of the
/// `InterceptorChain`, and the exchanges of the `Transport`. Whatever ends the request first
/// wins; everything else is cancelled and delivers nothing.
final class RequestOperation: Sendable {
  // No action runs under the machine's lock.
  private let machine: LockedBox<RequestStateMachine>
  private let transport: Transport
  private let queue: RequestQueue
  private let queueKey: RequestQueueKey
  private let settings: RequestSettings
  private var chain: InterceptorChain { settings.chain }
  private var scheduler: any PromiseScheduler { settings.scheduler }
  private var callbackQueue: DispatchQueue { settings.callbackQueue }
  /// Settles the promise once (later calls are ignored); released with its cancel handler.
  private let resolver: Promise<HTTPResponse>.Resolver

  init(
    settings: RequestSettings, transport: Transport, queue: RequestQueue,
    resolver: Promise<HTTPResponse>.Resolver
  ) {
    self.machine = LockedBox(RequestStateMachine(settings.machine))
    self.settings = settings
    self.transport = transport
    self.queue = queue
    self.queueKey = RequestQueueKey(settings.machine.request.url!)
    self.resolver = resolver
    if let sink = settings.exchange.bodySink as? any CommittingBodySink {
      // Weak: the sink lives in the operation's settings.
      sink.attach { [weak self] in self?.commit() }
    }
  }

  /// Starts the request at once if its origin has a free slot, else queues it until one frees.
  func enqueue() {
    // The queue's strong reference keeps a waiting operation alive; it goes when it leaves.
    guard let ticket = queue.enqueue(queueKey, start: { [self] in slotGranted() }) else { return }
    let remaining = settings.deadline?.remaining
    run { $0.queued(ticket, deadlineRemaining: remaining) }
  }

  /// Ends the request for a cancelled promise.
  func cancel() {
    run { $0.cancelled() }
  }

  /// Commits the request to the body its sink is streaming: no retry from now on, and only the
  /// request's own deadline still applies.
  private func commit() {
    let remaining = settings.deadline?.remaining
    run { $0.committed(ownDeadlineRemaining: remaining) }
  }

  private func slotGranted() {
    let remaining = settings.deadline?.remaining
    let now = scheduler.now
    run { $0.slotGranted(now: now, deadlineRemaining: remaining) }
  }

  /// Applies `event` to the machine under the lock, then runs the action it returns.
  private func run(_ event: (inout RequestStateMachine) -> RequestStateMachine.Action) {
    let action = machine.withLock { event(&$0) }
    perform(action)
  }

  private func perform(_ action: RequestStateMachine.Action) {
    switch action {
    case .none:
      break
    case .arm(let timer, let delay):
      arm(timer, after: delay)
    case .leaveQueue(let ticket, let expired):
      if queue.remove(ticket), expired { run { $0.queueWaitEnded() } }
    case .releaseSlot:
      queue.release(queueKey)
    case .start(let waitTimer, let deadline, let request, let attempt):
      waitTimer?.cancel()
      arm(.deadline, after: deadline)
      adapt(request, attempt)
    case .adapt(let request, let attempt):
      adapt(request, attempt)
    case .exchange(let request, let id, let attempt):
      var request = settings.exchange.bodySink?.prepare(request) ?? request
      if let observer = settings.exchange.uploadObserver { request = observer.prepare(request) }
      chain.observe(.willSend(request, attempt))
      let exchange = transport.start(request, settings: settings.exchange) { [self] outcome in
        switch outcome {
        case .success(let response): chain.observe(.didReceive(response, attempt))
        case .failure(let error): chain.observe(.didFail(error, attempt))
        }
        let now = scheduler.now
        run { $0.exchangeCompleted(outcome, id: id, now: now) }
      }
      run { $0.exchangeStarted(exchange, id: id) }
    case .decide(let outcome, let request, let attempt):
      chain.decide(outcome, for: request, attempt: attempt) { [self] result in
        let now = scheduler.now
        switch result {
        case .success(let decision): run { $0.decided(decision, now: now) }
        case .failure(let error): run { $0.stepFailed(error) }
        }
      }
    case .backOff(let delay, let attempt):
      chain.observe(.willRetry(after: delay, attempt))
      arm(.backoff(attempt: attempt.number), after: delay)
    case .cancelTimer(let timer):
      timer.cancel()
    case .cancelExchange(let exchange):
      exchange.cancel()
    case .commit(let timer, let ownDeadline):
      timer?.cancel()
      if let ownDeadline { arm(.ownDeadline, after: ownDeadline) }
    case .finish(let finish):
      // Stops the exchange's deliveries at once; the `URLSession` task's own `cancel()` is only
      // queued (`SessionTask`), so the promise settles without waiting for FoundationNetworking.
      finish.exchange?.cancel()
      for timer in finish.timers { timer.cancel() }
      // If the queue started the request meanwhile, `slotGranted` gives the slot back.
      if let ticket = finish.ticket { _ = queue.remove(ticket) }
      // The slot first, so the next request is on its way before callbacks run.
      if finish.releaseSlot { queue.release(queueKey) }
      chain.observe(.didFinish(finish.result))
      // An upload's last progress update is delivered before its promise settles.
      if let observer = settings.exchange.uploadObserver {
        let succeeded = if case .success = finish.result { true } else { false }
        let (resolver, result) = (resolver, finish.result)
        observer.requestFinished(succeeded: succeeded) { resolver.resolve(result) }
      } else {
        resolver.resolve(finish.result)
      }
    }
  }

  /// Runs the steps' `adapt` on the client's queue (never on the caller's thread); at once
  /// when no step adapts.
  private func adapt(_ request: URLRequest, _ attempt: HTTPAttempt) {
    let adapt: @Sendable () -> Void = { [self] in
      chain.adapt(request, for: attempt) { [self] result in
        let now = scheduler.now
        switch result {
        case .success(let adapted): run { $0.adapted(adapted, now: now) }
        case .failure(let error): run { $0.stepFailed(error) }
        }
      }
    }
    if chain.adapters.isEmpty { adapt() } else { callbackQueue.async(execute: adapt) }
  }

  /// Arms `timer` on the scheduler and hands its handle to the machine.
  private func arm(_ timer: RequestStateMachine.Timer, after delay: Duration) {
    // Weak: the work in flight (or the queue) keeps the operation alive, not a timer that may
    // be far away.
    let handle = scheduler.schedule(after: delay, on: callbackQueue) { [weak self] in
      guard let self else { return }
      switch timer {
      case .queueWait: run { $0.queueWaitExpired() }
      case .deadline: run { $0.deadlinePassed() }
      case .ownDeadline: run { $0.ownDeadlinePassed() }
      case .backoff(let attempt):
        let now = scheduler.now
        run { $0.backoffElapsed(after: attempt, now: now) }
      }
    }
    run { $0.timerArmed(handle, timer) }
  }
}
