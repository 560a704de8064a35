import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One `URLSessionDataTask` and what it has received: the unit the session delegate serves.
///
/// The body streams in through `append(_:)`, which enforces the size limit on decompressed
/// bytes as they arrive; redirects and challenges are decided here too. The completion runs at
/// most once: on success, on failure, or never if the exchange was cancelled first.
///
/// A hop that must repeat the request's body (a 307 or 308, say) is followed with a task of
/// the exchange's own, started once FoundationNetworking has delivered the 3xx: it would send
/// that hop without the body (see `Redirects.repeatsBody`).
final class Exchange: @unchecked Sendable {
  // Safety of `@unchecked Sendable`: every `var` is read and written only while `lock` is held;
  // the `let`s are constants of `Sendable` types (`URLSessionDataTask` is thread-safe).
  private let lock = NSLock()
  /// The task of the current hop: the first, or the last one the exchange started itself.
  var task: URLSessionDataTask {
    lock.lock()
    defer { lock.unlock() }
    return currentTask
  }
  private var currentTask: URLSessionDataTask
  /// Makes the task of a hop the exchange follows itself, registered with the session's
  /// delegate and not resumed.
  private let startTask: @Sendable (URLRequest, Exchange) -> URLSessionDataTask
  /// The hop to follow with a task of the exchange's own once the current task has completed.
  private var pendingHop: URLRequest?
  /// The request as the client sent it (its body is repeated by hops that keep the method).
  let request: URLRequest
  let requestURL: URL
  let maximumBodySize: Int
  let redirectPolicy: RedirectPolicy
  let sensitiveHeaders: HeaderNameSet
  let sensitiveParameters: ParameterNameSet
  /// `requestURL` without user-info and secret query values: the URL of the exchange's errors.
  let errorURL: URL
  private var visited: [URL]
  private var response: HTTPURLResponse?
  private var body = Data()
  private var answeredChallenge = false
  /// Whether `cancel()` has been (or is about to be) called on a task of this exchange: from
  /// then on a redirect question is never answered (see `redirect(_:to:answer:)`).
  private var cancellingTasks = false
  private var completion: (@Sendable (Result<HTTPResponse, HTTPError>) -> Void)?

  init(
    task: URLSessionDataTask, request: URLRequest, requestURL: URL, maximumBodySize: Int,
    redirectPolicy: RedirectPolicy, sensitiveHeaders: HeaderNameSet, sensitiveParameters: ParameterNameSet,
    startTask: @escaping @Sendable (URLRequest, Exchange) -> URLSessionDataTask,
    completion: @escaping @Sendable (Result<HTTPResponse, HTTPError>) -> Void
  ) {
    self.currentTask = task
    self.startTask = startTask
    self.request = request
    self.requestURL = requestURL
    self.maximumBodySize = maximumBodySize
    self.redirectPolicy = redirectPolicy
    self.sensitiveHeaders = sensitiveHeaders
    self.sensitiveParameters = sensitiveParameters
    self.errorURL = Redaction.url(requestURL, redacting: sensitiveParameters)
    self.visited = [requestURL]
    self.completion = completion
  }

  /// Cancels the task; the completion is dropped and never runs.
  func cancel() {
    lock.lock()
    completion = nil
    pendingHop = nil
    cancellingTasks = true
    let task = currentTask
    lock.unlock()
    task.cancel()
  }

  /// Runs the completion with `error` (once) and, unless told otherwise, cancels the task.
  ///
  /// Inside a delegate callback that has its own completion handler, the task must not be
  /// cancelled: FoundationNetworking traps when the handler is called after `cancel()`
  /// ("Received callback for HTTP redirection, but we're not waiting for it"). The handler's
  /// answer (`.cancel`, `nil`) ends the task instead.
  private func fail(_ error: HTTPError, cancellingTask: Bool = true) {
    lock.lock()
    let completion = self.completion
    self.completion = nil
    body = Data()
    pendingHop = nil
    if cancellingTask { cancellingTasks = true }
    let task = currentTask
    lock.unlock()
    if cancellingTask { task.cancel() }
    completion?(.failure(error))
  }

  /// Records the response head; refuses a declared, uncompressed length above the limit.
  func receive(_ response: URLResponse) -> URLSession.ResponseDisposition {
    guard let http = response as? HTTPURLResponse else {
      fail(.transportFailure(URLError(.badServerResponse), url: errorURL), cancellingTask: false)
      return .cancel
    }
    let encoded =
      http.value(forHTTPHeaderField: "Content-Encoding").map { !$0.isEmpty && $0 != "identity" } ?? false
    lock.lock()
    let followingHop = pendingHop != nil
    lock.unlock()
    // The 3xx of a hop the exchange follows itself is not the answer: its size does not count.
    let hasBody = task.originalRequest?.httpMethod != "HEAD" && !followingHop
    if hasBody, !encoded, http.expectedContentLength > Int64(maximumBodySize) {
      fail(.tooLarge(limit: maximumBodySize, url: errorURL), cancellingTask: false)
      return .cancel
    }
    lock.lock()
    self.response = http
    body = Data()
    lock.unlock()
    return .allow
  }

  /// Appends body bytes (already decompressed); cancels the task once past the size limit.
  func append(_ data: Data) {
    lock.lock()
    // Dropped: the body of a 3xx whose hop the exchange follows itself.
    guard completion != nil, pendingHop == nil else {
      lock.unlock()
      return
    }
    let tooLarge = body.count + data.count > maximumBodySize
    if !tooLarge { body.append(data) }
    lock.unlock()
    if tooLarge { fail(.tooLarge(limit: maximumBodySize, url: errorURL)) }
  }

  /// Decides a redirect hop and gives FoundationNetworking the answer through `answer`: the
  /// request to follow, or `nil` to stop — unless a task of this exchange is being cancelled,
  /// in which case the question is never answered.
  ///
  /// On `nil` the exchange has failed, or (not following) FoundationNetworking delivers the 3xx
  /// `redirection` and its body as the final response.
  ///
  /// FoundationNetworking (Swift 6.3.1) traps when an answer reaches a task cancelled after it
  /// asked ("Received callback for HTTP redirection, but we're not waiting for it"): the task's
  /// `cancel()` queues the stop on the task's work queue, where the answer is queued too, and the
  /// stop leaves the task in a state the answer does not expect. Both orders are made safe here,
  /// under the lock that `cancel()` takes before it cancels a task: answered first, the answer
  /// is queued ahead of any later stop; cancelled first, no answer is ever queued, and the stop
  /// completes the task with `cancelled` as for any other cancellation.
  func redirect(
    _ redirection: HTTPURLResponse, to proposed: URLRequest, answer: (URLRequest?) -> Void
  ) {
    lock.lock()
    let decision = Redirects.decide(
      location: redirection.value(forHTTPHeaderField: "Location"), status: redirection.statusCode,
      from: redirection.url, proposed: proposed, original: request,
      origin: requestURL, visited: visited, policy: redirectPolicy, sensitiveHeaders: sensitiveHeaders)
    var followed: URLRequest?
    if case .follow(let request) = decision, let url = request.url {
      visited.append(url)
      response = nil
      body = Data()
      if Redirects.repeatsBody(request) {
        // Not followed by FoundationNetworking, which delivers the 3xx instead; `complete`
        // then starts this hop. Its `Cookie` goes back to the client's own: the proposed one
        // holds the cookie storage's too, which the new task adds again.
        var hop = request
        if hop.value(forHTTPHeaderField: "Cookie") != nil {
          hop.setValue(self.request.value(forHTTPHeaderField: "Cookie"), forHTTPHeaderField: "Cookie")
        }
        pendingHop = hop
      } else {
        followed = request
      }
    }
    if !cancellingTasks { answer(followed) }
    lock.unlock()
    switch decision {
    case .follow, .deliver:
      break
    case .tooManyRedirects(let limit):
      fail(.tooManyRedirects(limit: limit, url: errorURL), cancellingTask: false)
    case .unsupportedScheme(let scheme):
      fail(
        .invalidRequest(
          "the redirect from \(Redaction.text(errorURL)) to the unsupported scheme '\(scheme)' was not followed"
        ),
        cancellingTask: false)
    }
  }

  /// Notes that an authentication challenge was refused, so that the 401 itself is delivered.
  func refuseChallenge() {
    lock.lock()
    answeredChallenge = true
    lock.unlock()
  }

  /// Delivers the outcome when the task completes.
  func complete(error: (any Error)?) {
    lock.lock()
    if let hop = pendingHop, completion != nil, error == nil {
      pendingHop = nil
      response = nil
      body = Data()
      lock.unlock()
      follow(hop)
      return
    }
    pendingHop = nil
    let completion = self.completion
    self.completion = nil
    let task = currentTask
    var response = self.response
    let body = self.body
    let refusedChallenge = answeredChallenge
    lock.unlock()
    guard let completion else { return }
    if response == nil, error == nil, let final = task.response as? HTTPURLResponse,
      (300..<400).contains(final.statusCode)
    {
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
      response.expectedContentLength > Int64(body.count),
      TransportFailure.message(of: unknown).flatMap({ TransportFailure.malformedResponse($0, code: .unknown) }
      )
        == nil
    {
      // libcurl's "transfer closed with bytes remaining" arrives as an unknown error (-1):
      // the connection ended before the declared body did.
      urlError = URLError(.networkConnectionLost, userInfo: unknown.userInfo)
    }
    if let response, urlError == nil || (refusedChallenge && urlError?.code == .cancelled) {
      completion(
        .success(
          Self.makeResponse(
            response, body: body, requestURL: requestURL, sensitiveHeaders: sensitiveHeaders,
            sensitiveParameters: sensitiveParameters)))
    } else {
      completion(.failure(.transportFailure(urlError ?? URLError(.badServerResponse), url: errorURL)))
    }
  }

  /// Starts the task of a hop the exchange follows itself; a cancellation meanwhile cancels it.
  private func follow(_ hop: URLRequest) {
    lock.lock()
    let cancelled = completion == nil
    lock.unlock()
    guard !cancelled else { return }
    let task = startTask(hop, self)
    lock.lock()
    currentTask = task
    let cancelledMeanwhile = completion == nil
    lock.unlock()
    task.resume()
    // A `cancel()` that ran before `currentTask` was set cancelled the previous task only.
    if cancelledMeanwhile { task.cancel() }
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
