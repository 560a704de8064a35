import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The life of one exchange (one request on the wire, its redirect hops included) as a value:
/// every event of the session delegate returns what its owner must do.
///
/// No lock, no thread, no `URLSession`: the tasks are opaque handles (`Task`), and the owner,
/// `Exchange`, keeps the machine under a lock and runs each returned action after unlocking,
/// feeding the task of a hop it starts back in as an event. The tests
/// (`ExchangeStateMachineTests`) drive it alone.
///
/// ```
/// receiving ─▶ finished
///     │            ▲
///     ▼            │
/// awaitingHop ─▶ startingHop ─▶ receiving (the hop's task)
/// ```
/// - **receiving**: the task is receiving the answer: its head (with the size limit on a
///   declared length), then its body (the limit on decompressed bytes); redirects are decided
///   here.
/// - **awaitingHop**: the task is a 3xx whose hop repeats the request's body
///   (`Redirects.repeatsBody`), which FoundationNetworking would send without it: the exchange
///   follows it with a task of its own once the 3xx completes; the 3xx's body is dropped and
///   not counted.
/// - **startingHop**: the 3xx has completed; the owner is making the hop's task.
/// - **finished**: the completion has run, or `cancel()` dropped it: it never runs again.
struct ExchangeStateMachine<Task> {
  typealias Completion = @Sendable (Result<HTTPResponse, HTTPError>) -> Void

  /// What the exchange is doing.
  enum State {
    case receiving
    case awaitingHop(URLRequest)
    case startingHop(URLRequest)
    case finished
  }

  /// The answer to FoundationNetworking's `willPerformHTTPRedirection`.
  enum RedirectAnswer {
    /// Call the completion handler with this request to follow, or `nil` to stop.
    case answer(URLRequest?)
    /// Never call it: a task of the exchange is being cancelled, and an answer reaching a task
    /// cancelled after it asked traps FoundationNetworking (see `Exchange.redirect`).
    case withhold
  }

  /// The one thing the owner does after an event, outside its lock.
  enum Action {
    /// Nothing.
    case none
    /// Cancels `cancelling` (if any), then runs `completion` with `result`.
    case finish(Finish)
    /// Cancels the task.
    case cancel(Task)
    /// Makes (and registers) the task of the hop, not resumed, and reports `hopStarted`.
    case startHop(URLRequest)
    /// Resumes the hop's task, then cancels it if `thenCancel` (the exchange was cancelled
    /// while it was being made).
    case resume(Task, thenCancel: Bool)
    /// Asks the body sink where the body of this response head goes (`begin`), then reports
    /// the answer with `sinkDecided`; returned by `receive` only.
    case ask(any ResponseBodySink, HTTPURLResponse)
    /// Hands body bytes to the sink (`write`); reports a failure with `sinkFailed`.
    case write(any ResponseBodySink, Data)
  }

  /// The end of the exchange: the outcome, and the task to cancel first.
  struct Finish {
    var cancelling: Task?
    var completion: Completion
    var result: Result<HTTPResponse, HTTPError>
  }

  /// The constants of one exchange.
  struct Settings {
    /// The request as the client sent it (its body is repeated by hops that keep the method).
    var request: URLRequest
    var requestURL: URL
    var maximumBodySize: Int
    var redirectPolicy: RedirectPolicy
    var sensitiveHeaders: HeaderNameSet
    var sensitiveParameters: ParameterNameSet
    /// Where the body of a final response goes; `nil` collects it in memory.
    var bodySink: (any ResponseBodySink)? = nil
    /// Whether the request has an upload body: a file or stream each task reads afresh, not
    /// the request's `httpBody`.
    var uploads = false
  }

  let settings: Settings
  /// `requestURL` without user-info and secret query values: the URL of the exchange's errors.
  let errorURL: URL
  private(set) var state: State = .receiving
  /// The task of the current hop: the first, or the last one the exchange started itself.
  private(set) var task: Task
  /// The method of the current task's request (a `HEAD` has no body to limit).
  private var method: String?
  /// Nil once it has run or `cancel()` dropped it (`state` is then `finished`).
  private var completion: Completion?
  private var visited: [URL]
  private var response: HTTPURLResponse?
  private var body = Data()
  /// Whether the current response's body goes to the sink rather than to `body`.
  private(set) var consuming = false
  /// The bytes of the current response's body handed to the sink.
  private(set) var consumedBytes: Int64 = 0
  private var refusedChallenge = false
  /// Whether `task` has completed.
  private var taskCompleted = false
  /// Whether a task of this exchange has been (or is about to be) cancelled: from then on a
  /// redirect question is never answered.
  private(set) var cancelling = false

  init(task: Task, settings: Settings, completion: @escaping Completion) {
    self.settings = settings
    self.errorURL = Redaction.url(settings.requestURL, redacting: settings.sensitiveParameters)
    self.task = task
    self.method = settings.request.httpMethod
    self.completion = completion
    self.visited = [settings.requestURL]
  }

  // MARK: Events

  /// The exchange was cancelled: the completion is dropped and the current task cancelled.
  mutating func cancel() -> Action {
    let wasCancelling = cancelling
    cancelling = true
    completion = nil
    body = Data()
    switch state {
    case .receiving, .awaitingHop:
      state = .finished
      return .cancel(task)
    case .startingHop:
      // The hop's task is not made yet: `hopStarted` cancels it.
      state = .finished
      return .none
    case .finished:
      // Failed with the task still running (a 3xx refused, say): it is stopped too, unless it
      // has completed or was cancelled already.
      return taskCompleted || wasCancelling ? .none : .cancel(task)
    }
  }

  /// Records the response head; returns the disposition for FoundationNetworking and what to
  /// run before giving it.
  ///
  /// A declared, uncompressed length above the limit is refused.
  mutating func receive(_ response: URLResponse) -> (URLSession.ResponseDisposition, Action) {
    guard let http = response as? HTTPURLResponse else {
      return (
        .cancel, fail(.transportFailure(URLError(.badServerResponse), url: errorURL), cancellingTask: false)
      )
    }
    let encoded =
      http.value(forHTTPHeaderField: "Content-Encoding").map { !$0.isEmpty && $0 != "identity" } ?? false
    // The 3xx of a hop the exchange follows itself is not the answer: its size does not count.
    let awaitingHop = if case .awaitingHop = state { true } else { false }
    let hasBody = method != "HEAD" && !awaitingHop
    consuming = false
    consumedBytes = 0
    if hasBody, completion != nil, let sink = settings.bodySink {
      self.response = http
      body = Data()
      return (.allow, .ask(sink, http))
    }
    return accept(http, limited: hasBody && !encoded)
  }

  /// The sink decided where the body of `head` goes (the answer to `.ask`).
  mutating func sinkDecided(
    _ decision: ResponseBodyDecision, for head: HTTPURLResponse
  ) -> (URLSession.ResponseDisposition, Action) {
    // Cancelled, or failed, while the sink was deciding.
    guard completion != nil, case .receiving = state else { return (.cancel, .none) }
    switch decision {
    case .consume:
      consuming = true
      return (.allow, .none)
    case .collect:
      let encoded =
        head.value(forHTTPHeaderField: "Content-Encoding").map { !$0.isEmpty && $0 != "identity" } ?? false
      return accept(head, limited: !encoded)
    case .fail(let error):
      return (.cancel, fail(error, cancellingTask: false))
    }
  }

  /// Keeps `http` as the response whose body is collected in memory; refuses a declared length
  /// above the limit when `limited`.
  private mutating func accept(_ http: HTTPURLResponse, limited: Bool) -> (
    URLSession.ResponseDisposition, Action
  ) {
    if limited, http.expectedContentLength > Int64(settings.maximumBodySize) {
      return (.cancel, fail(.tooLarge(limit: settings.maximumBodySize, url: errorURL), cancellingTask: false))
    }
    if completion != nil {
      self.response = http
      body = Data()
    }
    return (.allow, .none)
  }

  /// The body of the upload failed while being read (it made the task fail): the exchange ends
  /// with `error`.
  mutating func bodyFailed(_ error: HTTPError) -> Action {
    fail(error, cancellingTask: false)
  }

  /// The sink refused bytes it was given: the exchange ends with `error`, the task cancelled.
  mutating func sinkFailed(_ error: HTTPError) -> Action {
    fail(error, cancellingTask: !taskCompleted)
  }

  /// Body bytes arrived (already decompressed); past the size limit the exchange fails and the
  /// task is cancelled (no completion handler is pending in this callback).
  mutating func append(_ data: Data) -> Action {
    // Dropped: the body of a 3xx whose hop the exchange follows itself, or of a finished one.
    guard case .receiving = state else { return .none }
    if consuming, let sink = settings.bodySink {
      consumedBytes += Int64(data.count)
      return .write(sink, data)
    }
    guard body.count + data.count <= settings.maximumBodySize else {
      return fail(.tooLarge(limit: settings.maximumBodySize, url: errorURL), cancellingTask: true)
    }
    body.append(data)
    return .none
  }

  /// FoundationNetworking asks whether to follow `redirection` with `proposed`: returns the
  /// answer, which the owner gives before unlocking, and what to run after unlocking.
  ///
  /// Not following, FoundationNetworking delivers the 3xx and its body as the final response
  /// (`RedirectPolicy.doNotFollow`, or a hop the exchange follows itself).
  ///
  /// A task that does not follow redirects itself (`taskFollowsRedirects` false: the socket
  /// transport's) is answered `nil` and the exchange follows the hop with a task of its own.
  mutating func redirect(
    _ redirection: HTTPURLResponse, to proposed: URLRequest, taskFollowsRedirects: Bool = true
  ) -> (answer: RedirectAnswer, action: Action) {
    guard !cancelling else { return (.withhold, .none) }
    guard case .receiving = state else { return (.answer(nil), .none) }
    let decision = Redirects.decide(
      location: redirection.value(forHTTPHeaderField: "Location"), status: redirection.statusCode,
      from: redirection.url, proposed: proposed, original: settings.request,
      origin: settings.requestURL, visited: visited, policy: settings.redirectPolicy,
      sensitiveHeaders: settings.sensitiveHeaders)
    switch decision {
    case .follow(let request):
      guard let url = request.url else { return (.answer(nil), .none) }
      visited.append(url)
      response = nil
      body = Data()
      // An upload body is the tasks' own (FoundationNetworking sends a hop without it): a hop that
      // keeps the method repeats it, as `Redirects.carryBody` has it.
      let repeatsUpload =
        settings.uploads && redirection.statusCode != 303
        && request.httpMethod?.uppercased() == settings.request.httpMethod?.uppercased()
      guard repeatsUpload || Redirects.repeatsBody(request) || !taskFollowsRedirects else {
        return (.answer(request), .none)
      }
      // Not followed by FoundationNetworking, which delivers the 3xx instead; `complete` then
      // starts this hop. Its `Cookie` goes back to the client's own: the proposed one holds the
      // cookie storage's too, which the new task adds again.
      var hop = request
      if hop.value(forHTTPHeaderField: "Cookie") != nil {
        hop.setValue(settings.request.value(forHTTPHeaderField: "Cookie"), forHTTPHeaderField: "Cookie")
      }
      state = .awaitingHop(hop)
      return (.answer(nil), .none)
    case .deliver:
      return (.answer(nil), .none)
    case .tooManyRedirects(let limit):
      return (.answer(nil), fail(.tooManyRedirects(limit: limit, url: errorURL), cancellingTask: false))
    case .unsupportedScheme(let scheme):
      let error = HTTPError.invalidRequest(
        "the redirect from \(Redaction.text(errorURL)) to the unsupported scheme '\(scheme)' was not followed"
      )
      return (.answer(nil), fail(error, cancellingTask: false))
    }
  }

  /// An authentication challenge was refused, so that the 401 (or 407) itself is delivered.
  mutating func refuseChallenge() {
    refusedChallenge = true
  }

  /// The current task completed with `error`; `taskResponse` is the task's own `response`.
  ///
  /// A 3xx whose hop the exchange follows itself starts that hop; anything else delivers the
  /// outcome, once.
  mutating func complete(error: (any Error)?, taskResponse: URLResponse?) -> Action {
    taskCompleted = true
    guard let completion else { return .none }
    switch state {
    case .awaitingHop(let hop) where error == nil:
      state = .startingHop(hop)
      response = nil
      body = Data()
      return .startHop(hop)
    case .receiving, .awaitingHop:
      break
    case .startingHop, .finished:
      return .none
    }
    state = .finished
    self.completion = nil
    let result = outcome(error: error, taskResponse: taskResponse as? HTTPURLResponse)
    response = nil
    body = Data()
    return .finish(Finish(completion: completion, result: result))
  }

  /// The owner made `task` for the hop `startHop` asked for.
  mutating func hopStarted(_ task: Task) -> Action {
    self.task = task
    taskCompleted = false
    guard case .startingHop(let hop) = state else {
      // Cancelled while the task was being made: it goes through its start and stops at once.
      return .resume(task, thenCancel: true)
    }
    method = hop.httpMethod
    state = .receiving
    return .resume(task, thenCancel: false)
  }

  // MARK: Helpers

  /// Ends the exchange with `error` and, if `cancellingTask`, cancels the task.
  ///
  /// Inside a delegate callback that has its own completion handler, the task must not be
  /// cancelled: FoundationNetworking traps when the handler is called after `cancel()`
  /// ("Received callback for HTTP redirection, but we're not waiting for it"). The handler's
  /// answer (`.cancel`, `nil`) ends the task instead.
  private mutating func fail(_ error: HTTPError, cancellingTask: Bool) -> Action {
    guard let completion else { return .none }
    state = .finished
    self.completion = nil
    body = Data()
    if cancellingTask { cancelling = true }
    return .finish(
      Finish(cancelling: cancellingTask ? task : nil, completion: completion, result: .failure(error)))
  }

  /// The outcome of a completed task, from what it received and its `error`.
  private func outcome(error: (any Error)?, taskResponse: HTTPURLResponse?) -> Result<HTTPResponse, HTTPError>
  {
    var response = self.response
    if response == nil, error == nil, let final = taskResponse, (300..<400).contains(final.statusCode) {
      // A 301–308 that FoundationNetworking could not follow (no `Location`, or one that is not
      // a URL) completes without a `didReceive` response: it never reports the head of such a
      // status. The task keeps it; it is the answer, without its body (which FoundationNetworking
      // keeps too).
      response = final
    }
    // FoundationNetworking's message (libcurl's, e.g. "SSL certificate problem: …") is in the
    // user-info; `HTTPError.transportFailure` keeps it, redacted, and refines `.unknown` from it.
    var urlError = error.map {
      ($0 as? URLError)
        ?? URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: ($0 as NSError).localizedDescription])
    }
    if let unknown = urlError, unknown.code == .unknown, let response,
      response.expectedContentLength > Int64(body.count) + consumedBytes,
      TransportFailure.message(of: unknown).flatMap({ TransportFailure.malformedResponse($0, code: .unknown) }
      )
        == nil
    {
      // libcurl's "transfer closed with bytes remaining" arrives as an unknown error (-1):
      // the connection ended before the declared body did.
      urlError = URLError(.networkConnectionLost, userInfo: unknown.userInfo)
    }
    if let response, urlError == nil || (refusedChallenge && urlError?.code == .cancelled) {
      return .success(
        Self.makeResponse(
          response, body: body, requestURL: settings.requestURL, sensitiveHeaders: settings.sensitiveHeaders,
          sensitiveParameters: settings.sensitiveParameters))
    }
    return .failure(.transportFailure(urlError ?? URLError(.badServerResponse), url: errorURL))
  }

  /// Returns the response, whose descriptions redact `sensitiveHeaders` and `sensitiveParameters`.
  static func makeResponse(
    _ response: HTTPURLResponse, body: Data, requestURL: URL, sensitiveHeaders: HeaderNameSet,
    sensitiveParameters: ParameterNameSet
  ) -> HTTPResponse {
    var headers = HTTPHeaders().redacting(sensitiveHeaders, parameters: sensitiveParameters)
    for (name, value) in response.allHeaderFields {
      headers.add(name: "\(name.base)", value: "\(value)")
    }
    var made = HTTPResponse(
      statusCode: response.statusCode, headers: headers, body: body, requestURL: requestURL,
      url: response.url ?? requestURL)
    made.sensitiveParameters = sensitiveParameters
    return made
  }
}

extension ExchangeStateMachine {
  /// The state's name, for tests and descriptions.
  enum StateName: Equatable {
    case receiving, awaitingHop, startingHop, finished
  }

  /// The current state's name.
  var stateName: StateName {
    switch state {
    case .receiving: .receiving
    case .awaitingHop: .awaitingHop
    case .startingHop: .startingHop
    case .finished: .finished
    }
  }
}

// Checked by the compiler: the machine is `Sendable` when its task is, so `Exchange` can hold it
// in a `LockedBox` without `@unchecked`.
extension ExchangeStateMachine: Sendable where Task: Sendable {}
