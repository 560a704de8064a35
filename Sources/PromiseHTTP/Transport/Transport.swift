import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What one exchange runs by, resolved once per request.
struct ExchangeSettings: Sendable {
  /// The body size limit, counted after decompression.
  var maximumBodySize: Int
  var redirectPolicy: RedirectPolicy
  /// Removed from a redirect to another origin; redacted from errors.
  var sensitiveHeaders: HeaderNameSet
  /// Redacted from the URLs and excerpts of errors.
  var sensitiveParameters: ParameterNameSet
  /// Where the body of a final response goes; `nil` collects it in memory.
  var bodySink: (any ResponseBodySink)? = nil
  /// The body of an upload, made afresh for each task; `nil` sends the request's own `httpBody`.
  var uploadBody: (any UploadBodySource)? = nil
  /// Told of each attempt of an upload, the bytes each task has sent, the bytes that arrive,
  /// and how the request ended.
  var uploadObserver: (any UploadObserver)? = nil
  /// Whether the socket transport decodes a gzip, deflate or br body, as `URLSession` does: for
  /// ordinary requests; a transfer's body is passed on as it was sent.
  var decodesContent = false
}

/// What an `Exchange` drives: a `URLSession` task, or a task of the socket transport.
protocol ExchangeTask: AnyObject, Sendable {
  /// Starts the task.
  func resume()
  /// Stops the task; it completes with `URLError(.cancelled)` if it has not completed.
  func cancel()
  /// Names the exchange the task's events go to, before it is resumed.
  func attach(_ exchange: Exchange)
}

/// A client's `URLSession` with its delegate; the session is invalidated when the last user goes.
///
/// Requests in flight keep the transport alive, so a client released mid-request still
/// completes it; the session is then invalidated and releases its delegate.
final class Transport: Sendable {
  let session: URLSession
  let delegate: SessionDelegate
  /// Where exchanges complete: the client's queue.
  let callbackQueue: DispatchQueue
  /// Whether, and how, requests that prefer it go over the socket transport.
  let socketSettings: SocketTransportSettings
  /// Where the session's tasks are made, resumed and cancelled (see `SessionTask`).
  private let taskQueue = DispatchQueue(label: "PromiseHTTP.tasks")

  /// Makes the session of `configuration`; `socketTransport` says whether requests may go over
  /// the socket transport (`HTTPClient.Engine.automatic`).
  init(
    configuration: URLSessionConfiguration, callbackQueue: DispatchQueue, socketTransport: Bool = true,
    trust: HTTPClient.ServerTrust = .system, clientCertificate: HTTPClient.ClientCertificate? = nil,
    environment: [String: String]? = nil
  ) {
    self.socketSettings = SocketTransportSettings(
      configuration: configuration, enabled: socketTransport, trust: trust,
      clientCertificate: clientCertificate, environment: environment ?? ProcessInfo.processInfo.environment)
    let delegate = SessionDelegate()
    // The delegate's events run on a serial operation queue of their own, not on one whose
    // `underlyingQueue` is the client's queue: FoundationNetworking queues every body chunk
    // (16 KiB at most) as an operation without limit, and with an underlying queue a 1 GiB
    // download's backlog reached 110-561 MiB, against 21-49 MiB on a queue of its own
    // (Benchmarks `transfer/`, Docs/Performance.md "Transfers"). Completions still run on the
    // client's queue (`start`). Holding FoundationNetworking back when the backlog grows is not
    // safe: its one thread serves every session of the process (Performance.md says what an
    // attempt did).
    let operations = OperationQueue()
    operations.name = "PromiseHTTP.session"
    operations.maxConcurrentOperationCount = 1
    self.callbackQueue = callbackQueue
    self.delegate = delegate
    self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: operations)
  }

  deinit {
    session.finishTasksAndInvalidate()
    socketSettings.pool.closeAll()
  }

  /// Starts a data task (an upload task for a file) for `request`; `completion` runs once
  /// unless the exchange is cancelled.
  func start(
    _ request: URLRequest, settings: ExchangeSettings,
    completion: @escaping @Sendable (Result<HTTPResponse, HTTPError>) -> Void
  ) -> Exchange {
    let (task, stream) = makeTask(request, settings: settings)
    // A hop the exchange follows itself holds the transport until its task completes.
    let exchange = Exchange(
      task: task, request: request, requestURL: request.url!, maximumBodySize: settings.maximumBodySize,
      redirectPolicy: settings.redirectPolicy, sensitiveHeaders: settings.sensitiveHeaders,
      sensitiveParameters: settings.sensitiveParameters, bodySink: settings.bodySink,
      upload: settings.uploadBody, uploadObserver: settings.uploadObserver,
      startTask: { [self] hop, exchange in
        // A hop repeats an upload's body only if it keeps the method (a 307 or 308; a 301 or 302
        // of anything but a POST): a 303, or a POST turned into a GET, goes without it.
        var hopSettings = settings
        if hop.httpMethod?.uppercased() != request.httpMethod?.uppercased() { hopSettings.uploadBody = nil }
        let (task, stream) = makeTask(hop, settings: hopSettings)
        exchange.attach(stream)
        task.attach(exchange)
        return task
      },
      completion: { [callbackQueue] result in callbackQueue.async { completion(result) } })
    exchange.attach(stream)
    task.attach(exchange)
    task.resume()
    return exchange
  }

  /// Makes the task of `request`: a socket task if the socket transport can serve the request
  /// (`SocketTransportSettings.serves`), else a `URLSession` task, with a new copy of the upload
  /// body if there is one.
  private func makeTask(
    _ request: URLRequest, settings: ExchangeSettings
  ) -> (any ExchangeTask, (any UploadBodyStream)?) {
    let body = settings.uploadBody?.makeTaskBody()
    let stream: (any UploadBodyStream)? = if case .stream(let stream) = body { stream } else { nil }
    if socketSettings.serves(request) {
      return (
        SocketTask(request, body: body, settings: socketSettings, decodesContent: settings.decodesContent),
        stream
      )
    }
    if let refusal = socketSettings.tlsRefusal(for: request) {
      // `URLSession` would not check the host's pins, or present the client certificate: the
      // request fails before it is sent.
      return (SocketTask(request, body: body, settings: socketSettings, refusal: refusal), stream)
    }
    if case .stream(let live as any SequentialUploadBody) = body {
      // A sequence sent as it is produced needs the socket transport (a hop to HTTPS, say, cannot
      // have it): the body is stopped with the reason, and the socket task fails with it before
      // it connects, instead of the sequence being read on FoundationNetworking's queue.
      live.stop(
        with: .invalidRequest(
          "a stream of chunks is sent as it is produced over plain HTTP only; this hop needs URLSession"))
      return (SocketTask(request, body: body, settings: socketSettings), live)
    }
    var request = request
    if let stream { request.httpBodyStream = stream.makeInputStream() }
    // The task holds the transport until the `URLSessionTask` is made: `deinit` invalidates the
    // session, and a task cannot be made in an invalidated session.
    let task = SessionTask(queue: taskQueue, delegate: delegate) { [self, request] in
      if case .file(let url) = body { return session.uploadTask(with: request, fromFile: url) }
      return session.dataTask(with: request)
    }
    return (task, stream)
  }
}
