import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One `URLSessionDataTask` and what it has received: the unit the session delegate serves.
///
/// A thin owner of an `ExchangeStateMachine`, which decides everything (the response head, the
/// size limit on decompressed bytes, redirects, the hop the exchange follows itself, the
/// completion once): each delegate event goes to the machine under the lock, and the action it
/// returns runs after unlocking. The completion runs at most once: on success, on failure, or
/// never if the exchange was cancelled first.
///
/// A hop that must repeat the request's body (a 307 or 308, say) is followed with a task of
/// the exchange's own, started once FoundationNetworking has delivered the 3xx: it would send
/// that hop without the body (see `Redirects.repeatsBody`).
final class Exchange: Sendable {
  // No action runs under the lock, but for the answer to a redirect question (see
  // `redirect(_:to:answer:)`).
  private typealias Machine = ExchangeStateMachine<any ExchangeTask>
  private let machine: LockedBox<Machine>
  /// Makes the task of a hop the exchange follows itself, registered with the session's
  /// delegate and not resumed.
  private let startTask: @Sendable (URLRequest, Exchange) -> any ExchangeTask
  /// The body of an upload, which gives each task its copy.
  private let upload: (any UploadBodySource)?
  private let uploadObserver: (any UploadObserver)?
  /// The stream the current task reads its body from, if it reads one.
  private let bodyStream = LockedBox<(any UploadBodyStream)?>(nil)

  init(
    task: any ExchangeTask, request: URLRequest, requestURL: URL, maximumBodySize: Int,
    redirectPolicy: RedirectPolicy, sensitiveHeaders: HeaderNameSet, sensitiveParameters: ParameterNameSet,
    bodySink: (any ResponseBodySink)? = nil, upload: (any UploadBodySource)? = nil,
    uploadObserver: (any UploadObserver)? = nil,
    startTask: @escaping @Sendable (URLRequest, Exchange) -> any ExchangeTask,
    completion: @escaping @Sendable (Result<HTTPResponse, HTTPError>) -> Void
  ) {
    self.machine = LockedBox(
      Machine(
        task: task,
        settings: Machine.Settings(
          request: request, requestURL: requestURL, maximumBodySize: maximumBodySize,
          redirectPolicy: redirectPolicy, sensitiveHeaders: sensitiveHeaders,
          sensitiveParameters: sensitiveParameters, bodySink: bodySink, uploads: upload != nil),
        completion: completion))
    self.startTask = startTask
    self.upload = upload
    self.uploadObserver = uploadObserver
  }

  /// Cancels the task; the completion is dropped and never runs.
  func cancel() {
    // First: cancelling the task waits for a read of its body in progress.
    bodyStream.load()?.abort()
    run { $0.cancel() }
  }

  /// Notes the stream the current task reads its body from (a new one for each hop).
  func attach(_ stream: (any UploadBodyStream)?) {
    bodyStream.withLock { $0 = stream }
  }

  /// The current task has sent `totalBytes` of its body.
  func sent(totalBytes: Int64) {
    uploadObserver?.sent(totalBytes: totalBytes)
  }

  /// Returns the stream that replaces the body stream of the current task when libcurl rewinds
  /// it to resend the body (see `UploadBodySource.rewound`).
  func rewoundBodyStream() -> InputStream? {
    guard let upload else { return nil }
    let replaced = bodyStream.load()
    guard let stream = upload.rewound(replaced) else { return nil }
    replaced?.abort()
    attach(stream)
    return stream.makeInputStream()
  }

  /// Records the response head; refuses a declared, uncompressed length above the limit.
  ///
  /// With a body sink, the sink decides where the body goes first (outside the lock).
  func receive(_ response: URLResponse) -> URLSession.ResponseDisposition {
    uploadObserver?.received()
    var (disposition, action) = machine.withLock { $0.receive(response) }
    if case .ask(let sink, let head) = action {
      let decision = sink.begin(head)
      (disposition, action) = machine.withLock { $0.sinkDecided(decision, for: head) }
    }
    perform(action)
    return disposition
  }

  /// Appends body bytes (already decompressed); cancels the task once past the size limit.
  ///
  /// A consumed body goes to the sink, outside the lock (the delegate queue keeps the order).
  ///
  /// `mayWait`: the caller (the socket transport's thread) may be held by the sink until it has
  /// room; the session's delegate queue may not.
  func append(_ data: Data, mayWait: Bool = false) {
    uploadObserver?.received()
    let action = machine.withLock { $0.append(data) }
    if case .write(let sink, let data) = action {
      if let error = sink.write(data, mayWait: mayWait) { run { $0.sinkFailed(error) } }
    } else {
      perform(action)
    }
  }

  /// Decides a redirect hop and gives FoundationNetworking the answer through `answer`: the
  /// request to follow, or `nil` to stop — unless a task of this exchange is being cancelled,
  /// in which case the question is never answered.
  ///
  /// FoundationNetworking (Swift 6.3.1) traps when an answer reaches a task cancelled after it
  /// asked ("Received callback for HTTP redirection, but we're not waiting for it"): the task's
  /// `cancel()` queues the stop on the task's work queue, where the answer is queued too, and the
  /// stop leaves the task in a state the answer does not expect. Both orders are made safe by
  /// answering under the lock that `cancel()` takes before it cancels a task: answered first,
  /// the answer is queued ahead of any later stop; cancelled first, the machine withholds the
  /// answer, and the stop completes the task with `cancelled` as for any other cancellation.
  func redirect(
    _ redirection: HTTPURLResponse, to proposed: URLRequest, taskFollowsRedirects: Bool = true,
    answer: (URLRequest?) -> Void
  ) {
    let action = machine.withLock { machine in
      let (decision, action) = machine.redirect(
        redirection, to: proposed, taskFollowsRedirects: taskFollowsRedirects)
      // The one exception to "actions run after unlocking": the answer only queues work on
      // FoundationNetworking's queue, and must be queued before any `cancel()` of the task.
      if case .answer(let request) = decision { answer(request) }
      return action
    }
    perform(action)
  }

  /// Whether the current task's response is still wanted: not a 3xx whose hop the exchange
  /// follows itself, and not after the exchange has ended.
  var isReceiving: Bool {
    machine.withLock { $0.stateName == .receiving }
  }

  /// Notes that an authentication challenge was refused, so that the 401 itself is delivered.
  func refuseChallenge() {
    machine.withLock { $0.refuseChallenge() }
  }

  /// Delivers the outcome when the task completes, or starts the hop the exchange follows
  /// itself; `taskResponse` is the completed task's `response`.
  func complete(error: (any Error)?, taskResponse: URLResponse?) {
    // The body's own failure (a file that changed, say) explains the error.
    let stream = bodyStream.load()
    if error != nil, let failure = stream?.failure { run { $0.bodyFailed(failure) } }
    // Stops whatever still produces the finished task's body (a hop attaches its own).
    stream?.abort()
    run { $0.complete(error: error, taskResponse: taskResponse) }
  }

  /// Applies `event` to the machine under the lock, then runs the action it returns.
  private func run(_ event: (inout Machine) -> Machine.Action) {
    let action = machine.withLock { event(&$0) }
    perform(action)
  }

  private func perform(_ action: Machine.Action) {
    switch action {
    case .none:
      break
    case .finish(let finish):
      if let task = finish.cancelling {
        bodyStream.load()?.abort()
        task.cancel()
      }
      finish.completion(finish.result)
    case .cancel(let task):
      bodyStream.load()?.abort()
      task.cancel()
    case .startHop(let hop):
      let task = startTask(hop, self)
      run { $0.hopStarted(task) }
    case .resume(let task, let thenCancel):
      task.resume()
      if thenCancel { task.cancel() }
    case .write(let sink, let data):
      if let error = sink.write(data) { run { $0.sinkFailed(error) } }
    case .ask:
      // Handled by `receive`, the only event that returns it.
      assertionFailure("a sink question outside receive")
    }
  }
}
