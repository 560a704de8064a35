import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Work in flight that a `RequestStateMachine` can stop: the exchange of an attempt.
protocol RequestCancellable: Sendable {
  /// Stops the work; it delivers nothing afterwards.
  func cancel()
}

/// The life of one request as a value: every event returns the one action its owner must run.
///
/// No lock, no thread, no clock, no socket: time comes in as `now` (the client scheduler's
/// clock), timers and exchanges are opaque handles. `RequestOperation` owns one under a lock and
/// runs each returned action after unlocking, feeding what happens back in as events; the
/// tests (`RequestStateMachineTests`) drive it alone.
///
/// ```
/// idle ─▶ queued ─▶ authorizing ─▶ exchanging ─▶ deciding ─▶ finished
///   └────────────────▲    ▲             ▲            │
///                    │    └── backingOff ◀── retry ──┤
///                    └──────── replay (refresh) ◀────┘
/// ```
/// - **queued**: waiting for a slot of the origin (`RequestQueue`); ended by the slot, the
///   queue-wait limit, the request's own deadline, or cancellation.
/// - **authorizing**: the steps' `adapt` (a token attached); the deadline runs from here on.
/// - **exchanging**: one exchange on the wire.
/// - **deciding**: the steps' `decide` (the authenticator refreshing its token on a 401, the
///   retry policy choosing a backoff).
/// - **backingOff**: waiting for the next attempt; a retry that could not start before the
///   deadline is refused and the outcome delivered at once.
/// - **finished**: settled; every later event is ignored, and late handles are cancelled.
struct RequestStateMachine {
  /// What the machine is doing; `Phase` while it holds a slot.
  enum State {
    case idle
    case queued(Queued)
    case running(Running, Phase)
    case finished
  }

  /// A request waiting in the queue.
  struct Queued {
    var ticket: RequestQueueTicket
    var timer: (any ScheduledWork)?
    /// Whether the request's own deadline, not `maximumQueueWait`, ends the wait.
    var deadlineFirst: Bool
  }

  /// What a request holding a slot keeps: its attempt, replays and deadline.
  struct Running {
    var attempt = 1
    var replays = 0
    /// The instant, on the scheduler's clock, by which the request must have settled.
    var deadline: Duration
    /// The time that was allowed, for `HTTPError.timedOut`.
    var allowed: Duration
    var deadlineTimer: (any ScheduledWork)?
    /// Whether the body of the current exchange streams to a reader (`committed`): the request
    /// is then neither retried nor replayed, and only its own deadline still applies.
    var committed = false
  }

  /// What a running request is doing.
  enum Phase {
    case authorizing
    case exchanging(URLRequest, id: UInt64, exchange: (any RequestCancellable)?)
    case deciding(URLRequest, outcome: Result<HTTPResponse, HTTPError>)
    case backingOff(timer: (any ScheduledWork)?)
  }

  /// The timers the owner arms on its scheduler.
  enum Timer: Equatable {
    case queueWait
    case deadline
    /// The request's own deadline, armed when a streamed body is committed (`committed`).
    case ownDeadline
    /// The wait after attempt `attempt`.
    case backoff(attempt: Int)
  }

  /// The one thing the owner does after an event, outside its lock.
  enum Action {
    /// Nothing.
    case none
    /// Arms `timer` after `delay` and reports its handle with `timerArmed(_:_:)`.
    case arm(Timer, after: Duration)
    /// Takes the request out of the queue; if that succeeds and `expired`, reports
    /// `queueWaitEnded()` (else the slot was given meanwhile and `slotGranted` follows).
    case leaveQueue(RequestQueueTicket, expired: Bool)
    /// Gives back the slot the queue just gave: the request has finished meanwhile.
    case releaseSlot
    /// Cancels the queue-wait timer (if any), arms the deadline after `deadline`, then adapts.
    case start(cancelling: (any ScheduledWork)?, deadline: Duration, adapt: URLRequest, HTTPAttempt)
    /// Runs the steps' `adapt` on the request; reports `adapted` or `stepFailed`.
    case adapt(URLRequest, HTTPAttempt)
    /// Starts the exchange; reports `exchangeStarted`, then `exchangeCompleted`.
    case exchange(URLRequest, id: UInt64, HTTPAttempt)
    /// Runs the steps' `decide`; reports `decided` or `stepFailed`.
    case decide(Result<HTTPResponse, HTTPError>, URLRequest, HTTPAttempt)
    /// Arms the backoff timer (`Timer.backoff`) after `delay`.
    case backOff(after: Duration, HTTPAttempt)
    /// Cancels a timer that is no longer wanted.
    case cancelTimer(any ScheduledWork)
    /// Cancels an exchange that is no longer wanted.
    case cancelExchange(any RequestCancellable)
    /// Settles the promise and cleans up (see `Finish`).
    case finish(Finish)
    /// Cancels the deadline timer (if any), then arms `Timer.ownDeadline` after `ownDeadline`
    /// (if the request has one): a streamed body was committed.
    case commit(cancelling: (any ScheduledWork)?, ownDeadline: Duration?)
  }

  /// What ending the request takes: the outcome, and what to cancel, leave or release first.
  struct Finish {
    var result: Result<HTTPResponse, any Error>
    var timers: [any ScheduledWork] = []
    var exchange: (any RequestCancellable)?
    /// The ticket to take out of the queue (cancelled while waiting).
    var ticket: RequestQueueTicket?
    /// Whether the request held a slot, which must be released.
    var releaseSlot = false
  }

  /// The constants of one request.
  struct Settings {
    /// The request as built from the client's configuration, before any step.
    var request: URLRequest
    var method: HTTPMethod
    var acceptable: Range<Int>
    /// The deadline of each request, from when it leaves the queue.
    var timeout: Duration
    var maximumQueueWait: Duration
    /// The `allowed` of the request's own `Deadline`, if it has one.
    var deadlineAllowed: Duration?
    /// The secret query parameters, redacted from the URL of an error.
    var sensitiveParameters: ParameterNameSet = .defaultSensitive
  }

  let settings: Settings
  private(set) var state: State = .idle
  private var exchanges: UInt64 = 0
  /// The exchange whose outcome arrived last: its late handle needs no cancelling.
  private var completedExchange: UInt64 = 0

  init(_ settings: Settings) {
    self.settings = settings
  }

  private var url: URL? {
    settings.request.url.map { Redaction.url($0, redacting: settings.sensitiveParameters) }
  }

  // MARK: The queue

  /// The request waits in the queue under `ticket`; `deadlineRemaining` is what its own
  /// deadline has left, if it has one.
  mutating func queued(_ ticket: RequestQueueTicket, deadlineRemaining: Duration?) -> Action {
    switch state {
    case .idle:
      let wait = settings.maximumQueueWait
      let end = min(deadlineRemaining ?? wait, wait)
      state = .queued(Queued(ticket: ticket, timer: nil, deadlineFirst: end < wait))
      return .arm(.queueWait, after: end)
    case .finished:
      // Cancelled before the ticket was known.
      return .leaveQueue(ticket, expired: false)
    case .queued, .running:
      // Started by a release on another thread before the ticket came back.
      return .none
    }
  }

  /// The queue-wait timer fired.
  mutating func queueWaitExpired() -> Action {
    guard case .queued(let queued) = state else { return .none }
    return .leaveQueue(queued.ticket, expired: true)
  }

  /// The request was taken out of the queue after its wait expired.
  mutating func queueWaitEnded() -> Action {
    guard case .queued(let queued) = state else { return .none }
    state = .finished
    let error: HTTPError =
      queued.deadlineFirst
      ? .timedOut(url: url, deadline: settings.deadlineAllowed ?? settings.maximumQueueWait)
      : .queueWaitExceeded(limit: settings.maximumQueueWait, url: url)
    return .finish(Finish(result: .failure(error), timers: queued.timer.map { [$0] } ?? []))
  }

  /// The queue gave the request a slot at `now`: the deadline starts, then the first attempt.
  mutating func slotGranted(now: Duration, deadlineRemaining: Duration?) -> Action {
    let waitTimer: (any ScheduledWork)?
    switch state {
    case .idle: waitTimer = nil
    case .queued(let queued): waitTimer = queued.timer
    case .finished: return .releaseSlot
    case .running: return .none
    }
    let length = min(deadlineRemaining ?? settings.timeout, settings.timeout)
    // The request's own deadline, when it is what ends the request, reports its own allowance.
    let ownFirst = deadlineRemaining.map { $0 <= settings.timeout } ?? false
    let running = Running(
      deadline: now.saturatingAdding(length), allowed: ownFirst ? settings.deadlineAllowed ?? length : length)
    state = .running(running, .authorizing)
    return .start(
      cancelling: waitTimer, deadline: length, adapt: settings.request, attempt(running, now: now))
  }

  // MARK: Timers

  /// The owner armed `timer`; the machine keeps the handle, or returns it to cancel.
  mutating func timerArmed(_ handle: any ScheduledWork, _ timer: Timer) -> Action {
    switch (state, timer) {
    case (.queued(var queued), .queueWait) where queued.timer == nil:
      queued.timer = handle
      state = .queued(queued)
      return .none
    case (.running(var running, let phase), .deadline) where running.deadlineTimer == nil:
      running.deadlineTimer = handle
      state = .running(running, phase)
      return .none
    case (.running(var running, let phase), .ownDeadline)
    where running.committed && running.deadlineTimer == nil:
      running.deadlineTimer = handle
      state = .running(running, phase)
      return .none
    case (.running(let running, .backingOff(nil)), .backoff(let attempt)) where attempt == running.attempt:
      state = .running(running, .backingOff(timer: handle))
      return .none
    default:
      return .cancelTimer(handle)
    }
  }

  /// The deadline timer fired.
  mutating func deadlinePassed() -> Action {
    // Committed: the timer of `timeout` was being cancelled as it fired.
    guard case .running(let running, _) = state, !running.committed else { return .none }
    return finish(.failure(HTTPError.timedOut(url: url, deadline: running.allowed)))
  }

  /// The request's own deadline passed while its committed body was streaming.
  mutating func ownDeadlinePassed() -> Action {
    guard case .running(let running, _) = state, running.committed, let allowed = settings.deadlineAllowed
    else {
      return .none
    }
    return finish(.failure(HTTPError.timedOut(url: url, deadline: allowed)))
  }

  /// The backoff after attempt `attempt` is over at `now`: the next attempt starts.
  mutating func backoffElapsed(after attempt: Int, now: Duration) -> Action {
    guard case .running(var running, .backingOff) = state, running.attempt == attempt else { return .none }
    running.attempt += 1
    state = .running(running, .authorizing)
    return .adapt(settings.request, self.attempt(running, now: now))
  }

  // MARK: Steps and exchanges

  /// The steps' `adapt` produced `request` at `now`: it is sent.
  mutating func adapted(_ request: URLRequest, now: Duration) -> Action {
    guard case .running(let running, .authorizing) = state else { return .none }
    exchanges += 1
    var request = request
    request.timeoutInterval = Self.transportTimeoutInterval(remaining: running.deadline - now)
    state = .running(running, .exchanging(request, id: exchanges, exchange: nil))
    return .exchange(request, id: exchanges, attempt(running, now: now))
  }

  /// The `URLRequest.timeoutInterval` for an exchange with `remaining` left before the deadline.
  ///
  /// libcurl's own timeout (whole seconds) is kept just beyond ours, which comes first, and
  /// capped at `maximumTransportTimeout`.
  static func transportTimeoutInterval(remaining: Duration) -> TimeInterval {
    min(maximumTransportTimeout, max(1, remaining.secondsValue.rounded(.up) + 1))
  }

  /// The longest `timeoutInterval` handed to FoundationNetworking: 10^9 s, about 31.7 years.
  ///
  /// FoundationNetworking computes `Int(timeoutInterval) * 1000` (milliseconds, for libcurl and
  /// for a Dispatch timer of its own) and traps on overflow: a client `timeout` of
  /// `.seconds(Int64.max)` crashed the process on its first request. 10^9 s is 10^12 ms, and
  /// 10^18 ns for the Dispatch timer: both fit in 64 bits with room to spare, and now + 10^18 ns
  /// stays below the 2^62 ns where libdispatch reads a deadline as another clock's (see
  /// `Duration.dispatchDeadline`). A longer deadline is still enforced by the client's own timer.
  static let maximumTransportTimeout: TimeInterval = 1_000_000_000

  /// A step's `adapt` or `decide` failed with `error`: the request ends with it.
  mutating func stepFailed(_ error: any Error) -> Action {
    switch state {
    case .running(_, .authorizing), .running(_, .deciding): return finish(.failure(error))
    default: return .none
    }
  }

  /// The exchange `id` has started; the machine keeps its handle to cancel it.
  mutating func exchangeStarted(_ exchange: any RequestCancellable, id: UInt64) -> Action {
    if case .running(let running, .exchanging(let request, id, nil)) = state {
      state = .running(running, .exchanging(request, id: id, exchange: exchange))
      return .none
    }
    // Its outcome arrived first: nothing to stop (and cancelling inside a delegate callback
    // would trap). Otherwise the request ended meanwhile: stop it.
    return id == completedExchange ? .none : .cancelExchange(exchange)
  }

  /// The exchange `id` ended with `outcome` at `now`: the steps decide what it means.
  mutating func exchangeCompleted(
    _ outcome: Result<HTTPResponse, HTTPError>, id: UInt64, now: Duration
  ) -> Action {
    guard case .running(let running, .exchanging(let request, id, _)) = state else { return .none }
    completedExchange = id
    state = .running(running, .deciding(request, outcome: outcome))
    // A committed body has been handed to its reader: its end (or its cut) is the outcome, with
    // no step to decide a retry or a replay.
    if running.committed { return finish(deliver(outcome)) }
    return .decide(outcome, request, attempt(running, now: now))
  }

  // MARK: Streaming

  /// The response of the current exchange is being handed to a reader as it arrives (the head
  /// of a streamed response was delivered): the request is committed to it.
  ///
  /// From now on nothing is retried or replayed (the exchange's end is the outcome), and the
  /// client's `timeout` no longer applies: a stream lasts as long as its reader wants it. The
  /// request's own deadline, `ownDeadlineRemaining` from now if it has one, still bounds it.
  mutating func committed(ownDeadlineRemaining: Duration?) -> Action {
    guard case .running(var running, let phase) = state, case .exchanging = phase, !running.committed else {
      return .none
    }
    if let remaining = ownDeadlineRemaining, remaining <= .zero {
      return finish(
        .failure(HTTPError.timedOut(url: url, deadline: settings.deadlineAllowed ?? running.allowed)))
    }
    running.committed = true
    let timer = running.deadlineTimer
    running.deadlineTimer = nil
    state = .running(running, phase)
    return .commit(cancelling: timer, ownDeadline: ownDeadlineRemaining)
  }

  /// The steps decided `decision` at `now`.
  mutating func decided(_ decision: HTTPDecision, now: Duration) -> Action {
    guard case .running(var running, .deciding(_, let outcome)) = state else { return .none }
    switch decision {
    case .proceed, .deliver:
      return finish(deliver(outcome))
    case .fail(let error):
      return finish(.failure(error))
    case .replay:
      guard running.replays < HTTPDecision.maximumReplays else { return finish(deliver(outcome)) }
      running.replays += 1
      state = .running(running, .authorizing)
      return .adapt(settings.request, attempt(running, now: now))
    case .retry(let delay):
      // No retry that could not start before the deadline: the outcome now, not a timeout later.
      guard now.saturatingAdding(max(delay, .zero)) < running.deadline else {
        return finish(deliver(outcome))
      }
      state = .running(running, .backingOff(timer: nil))
      return .backOff(after: max(delay, .zero), attempt(running, now: now))
    }
  }

  /// The outcome as the promise gets it: an acceptable status fulfils, anything else rejects.
  private func deliver(_ outcome: Result<HTTPResponse, HTTPError>) -> Result<HTTPResponse, any Error> {
    switch outcome {
    case .success(let response) where settings.acceptable.contains(response.statusCode):
      return .success(response)
    case .success(let response):
      return .failure(HTTPError.unacceptable(response))
    case .failure(let error):
      return .failure(error)
    }
  }

  // MARK: Cancellation

  /// The promise was cancelled: whatever the request is doing stops.
  mutating func cancelled() -> Action {
    switch state {
    case .idle:
      state = .finished
      return .finish(Finish(result: .failure(CancellationError())))
    case .queued(let queued):
      state = .finished
      return .finish(
        Finish(
          result: .failure(CancellationError()), timers: queued.timer.map { [$0] } ?? [],
          ticket: queued.ticket))
    case .running:
      return finish(.failure(CancellationError()))
    case .finished:
      return .none
    }
  }

  // MARK: Helpers

  /// Ends a running request with `result`, collecting what it holds.
  private mutating func finish(_ result: Result<HTTPResponse, any Error>) -> Action {
    guard case .running(let running, let phase) = state else { return .none }
    state = .finished
    var finish = Finish(result: result, releaseSlot: true)
    if let timer = running.deadlineTimer { finish.timers.append(timer) }
    switch phase {
    case .exchanging(_, _, let exchange): finish.exchange = exchange
    case .backingOff(let timer?): finish.timers.append(timer)
    default: break
    }
    return .finish(finish)
  }

  private func attempt(_ running: Running, now: Duration) -> HTTPAttempt {
    HTTPAttempt(
      number: running.attempt, replays: running.replays, method: settings.method,
      acceptableStatusCodes: settings.acceptable, remaining: max(.zero, running.deadline - now))
  }
}

extension RequestStateMachine {
  /// The phase's name, for tests and descriptions.
  enum PhaseName: Equatable {
    case idle, queued, authorizing, exchanging, deciding, backingOff, finished
  }

  /// The current phase's name.
  var phase: PhaseName {
    switch state {
    case .idle: .idle
    case .queued: .queued
    case .running(_, .authorizing): .authorizing
    case .running(_, .exchanging): .exchanging
    case .running(_, .deciding): .deciding
    case .running(_, .backingOff): .backingOff
    case .finished: .finished
    }
  }
}
