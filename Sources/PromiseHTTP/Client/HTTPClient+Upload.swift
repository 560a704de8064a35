import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

extension HTTPClient {
  /// Sends `body` to `path` and returns a promise of the response.
  ///
  /// The body is a file, a stream of chunks, bytes or a multipart form (see `HTTPBody` for how
  /// each goes on the wire); a file or form is read in chunks, never loaded whole. Without a
  /// `Content-Type` in `headers`, a form sends its own (with its boundary), anything else
  /// `application/octet-stream`.
  ///
  /// Retries follow the retry policy (which retries `PUT` but not `POST` by default) and send the
  /// body again from its start. A file that cannot be read rejects the promise with
  /// `HTTPError.invalidRequest` naming it, before anything is sent.
  ///
  /// Time: the client's `timeout` is an idle timeout for an upload, as for a download — it
  /// fails with `HTTPError.timedOut` when no byte has been sent or received for that long (a
  /// large body over a slow link that keeps sending is never cut by it) — while the request's
  /// own `deadline`, if it has one, bounds the whole transfer, retries included (and, for a
  /// stream of chunks, the writing of its temporary file). The idle time starts when the request
  /// is sent, not while it waits for a connection slot; the wait before a retry counts as idle.
  /// Once the whole body is sent, a server that takes longer than `timeout` to answer fails it
  /// as well.
  ///
  /// - Parameters:
  ///   - body: What to send.
  ///   - path: Relative to `baseURL`; see `HTTPPath` for untrusted input.
  ///   - method: `POST` by default; not `GET` or `HEAD`, which carry no body.
  ///   - query: Query items, percent-encoded.
  ///   - headers: Header fields for this request.
  ///   - deadline: A bound on the whole transfer, retries included; may be shared by a chain
  ///     of requests.
  ///   - progress: Told the bytes sent and the total expected (`nil` for a stream of unknown
  ///     length); its last update (`isFinal`) is delivered (its closure returned) before the
  ///     promise is fulfilled, and none comes when it is rejected.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the response, rejected with an `HTTPError` on failure.
  public func upload(
    _ body: HTTPBody, to path: String, method: HTTPMethod = .post, query: [URLQueryItem] = [],
    headers: [String: String] = [:], deadline: Deadline? = nil, progress: TransferProgressHandler? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    upload(
      body,
      with: HTTPRequest(
        method: method, path: path, query: query, headers: HTTPHeaders(headers), deadline: deadline),
      progress: progress, file: file, line: line)
  }

  /// Sends `body` with `request` (its method, path, headers, deadline and policies) and returns a
  /// promise of the response; see `upload(_:to:method:query:headers:deadline:progress:file:line:)`.
  ///
  /// The client's `timeout` is an idle timeout for an upload; `request.deadline` bounds the
  /// whole transfer.
  ///
  /// `request.body` must be `nil`: the body is `body`.
  public func upload(
    _ body: HTTPBody, with request: HTTPRequest, progress: TransferProgressHandler? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    let reporter = progress.map { ProgressReporter($0, defaultQueue: callbackQueue) }
    func reject(_ error: HTTPError) -> Promise<HTTPResponse> {
      reporter?.abandon()
      return Promise(error: error, file: file, line: line)
    }
    guard request.body == nil else {
      return reject(.invalidRequest("an upload's request has a body of its own; give it as the HTTPBody"))
    }
    guard request.method != .get, request.method != .head else {
      return reject(
        .invalidRequest("a \(request.method.rawValue) request carries no body; upload with POST or PUT"))
    }
    if case .stream(let producer, let length) = body.content {
      // A request that cannot be sent is refused before the sequence is read.
      switch prepare(request) {
      case .failure(let error): return reject(error)
      case .success(let built) where socketTransportServes(built):
        // Sent as the sequence yields it, and read once: never retried.
        var live = request
        live.retryPolicy = RetryPolicy.none
        let source = LiveUploadSource(producer, length: length)
        let prepared = PreparedUpload(
          source: source, length: length, contentType: MultipartForm.defaultFileType)
        // The returned promise is the only observer of the upload's: cancelling it still cancels
        // the upload, whose own cancellation stops the sequence (`ended`).
        return send(
          prepared, with: live, reporter: reporter, ended: { source.uploadSettled() }, file: file, line: line
        )
        .whenSettled(on: callbackQueue, file: file, line: line) { _ in source.uploadSettled() }
      case .success(let built):
        return uploadStream(
          producer, length: length, with: request, url: built.url, reporter: reporter, file: file, line: line)
      }
    }
    switch body.prepare() {
    case .success(let prepared):
      return send(prepared, with: request, reporter: reporter, file: file, line: line)
    case .failure(let error):
      return reject(error)
    }
  }

  /// Writes a stream of chunks to a temporary file, then uploads the file (see `UploadSpool`);
  /// the file is removed when the request settles.
  ///
  /// The request's own `deadline` runs while the sequence is written; the client's `timeout`,
  /// an idle timeout, runs from when the file is sent.
  private func uploadStream(
    _ producer: ChunkProducer, length: Int64?, with request: HTTPRequest, url: URL?,
    reporter: ProgressReporter?, file: StaticString, line: UInt
  ) -> Promise<HTTPResponse> {
    let (promise, resolver) = Promise<HTTPResponse>.pending(file: file, line: line)
    // Whether the file was sent (its request then keeps the deadline), or the deadline passed
    // first: whichever comes first wins.
    let sending = LockedBox<Bool?>(nil)
    let spooling = Task { [self] in
      switch await UploadSpool.spool(producer, length: length) {
      case .failure(let error):
        reporter?.abandon()
        resolver.reject(error)
      case .success(let (spooled, size)):
        let sends = sending.withLock { state in
          if state == nil { state = true }
          return state == true && resolver.isPending
        }
        guard sends else {
          try? FileManager.default.removeItem(at: spooled)
          return
        }
        let prepared = PreparedUpload(
          source: FileUploadSource(spooled), length: size, contentType: MultipartForm.defaultFileType)
        let sent = send(prepared, with: request, reporter: reporter, file: file, line: line)
        resolver.onCancel { sent.cancel() }
        sent.whenSettled(on: callbackQueue) { result in
          try? FileManager.default.removeItem(at: spooled)
          resolver.resolve(result)
        }
      }
    }
    resolver.onCancel { spooling.cancel() }
    if let deadline = request.deadline {
      let errorURL = url.map { Redaction.url($0, redacting: ParameterNameSet(sensitiveQueryParameters)) }
      callbackQueue.asyncAfter(deadline: deadline.instant) {
        // Still writing the sequence (a sent request has its own timer for the same deadline).
        let passed = sending.withLock { state in
          if state == nil { state = false }
          return state == false
        }
        guard passed else { return }
        spooling.cancel()
        resolver.reject(HTTPError.timedOut(url: errorURL, deadline: deadline.allowed))
      }
    }
    return promise
  }

  /// Sends `prepared` with `request`, reporting to `reporter`, under the idle timer (the
  /// client's `timeout`) and the request's own deadline.
  private func send(
    _ prepared: PreparedUpload, with request: HTTPRequest, reporter: ProgressReporter?,
    ended: (@Sendable () -> Void)? = nil, file: StaticString, line: UInt
  ) -> Promise<HTTPResponse> {
    var request = request
    if request.headers["Content-Type"] == nil { request.headers["Content-Type"] = prepared.contentType }
    request.body = prepared.data
    let (promise, resolver) = Promise<HTTPResponse>.pending(file: file, line: line)
    if let ended { resolver.onCancel(ended) }
    let idleTimeout = timeout
    var operation: TransferOperation<UploadMonitor>?
    let response = send(
      request,
      adjusting: { settings in
        let monitor = UploadMonitor(
          reporter: reporter, expected: prepared.length, scheduler: settings.scheduler,
          idleTimeout: idleTimeout)
        settings.exchange.uploadBody = prepared.source
        settings.exchange.uploadObserver = monitor
        // The client's `timeout` is the idle timeout (run by the operation); only the request's
        // own deadline bounds the whole transfer.
        settings.machine.timeout = .endOfTime
        let errorURL = settings.machine.request.url.map {
          Redaction.url($0, redacting: settings.exchange.sensitiveParameters)
        }
        operation = TransferOperation(
          subject: monitor, resolver: resolver, idleTimeout: idleTimeout, scheduler: settings.scheduler,
          queue: settings.callbackQueue, errorURL: errorURL)
        return nil
      }, file: file, line: line)
    guard let operation else {
      // Refused before it was sent (an invalid path, say): no update will come.
      reporter?.abandon()
      return response
    }
    operation.start(response)
    return promise
  }
}
