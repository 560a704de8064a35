import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

extension HTTPClient {
  /// Downloads the body of `request` to the file at `destination` and returns a promise of it.
  ///
  /// The body streams to a temporary file beside the destination
  /// (`.<name>.promisehttp-download`, in the same directory) and is moved onto the destination
  /// only once complete, so the destination holds either the whole body or nothing new; memory
  /// stays flat whatever the size (`maximumResponseSize` does not apply). The promise is
  /// fulfilled with the response's head and the file; a status outside the acceptable range
  /// rejects with `HTTPError.unacceptableStatus` as `send(_:)` does, and writes no file.
  ///
  /// Before anything is sent, the destination is checked and the temporary file created: an
  /// existing destination rejects with `TransferError.destinationExists` (unless
  /// `options.replacesExistingFile`), a directory that cannot be written with
  /// `TransferError.fileSystem` (`EACCES`, `EROFS`). A failed write (a full disk: `ENOSPC`)
  /// rejects with `TransferError.fileSystem` and is not retried.
  ///
  /// A connection lost mid-body is retried by the request's `RetryPolicy` (`GET` is, by
  /// default) and the retry asks only for the missing bytes (`Range: bytes=N-` with `If-Range`
  /// and the first response's strong `ETag` or `Last-Modified`); a server that answers with the
  /// whole body (a `200`) restarts it cleanly, and a `206` for other bytes or of another
  /// version fails that attempt so that the next one starts over.
  ///
  /// Time: the client's `timeout` is an idle timeout for a download — it fails with
  /// `HTTPError.timedOut` when no byte has arrived for that long (a slow download that keeps
  /// receiving is never cut by it) — while the request's own `deadline`, if it has one, bounds
  /// the whole transfer, retries included. The idle time starts when the request is sent, not
  /// while it waits for a connection slot; the wait before a retry counts as idle.
  ///
  /// A failure, a cancellation of the promise or a passed deadline removes the temporary file
  /// (or keeps it for a later download under `options.keepsPartialFileOnFailure`) and never
  /// touches the destination; progress then stops without a final update.
  ///
  /// - Parameters:
  ///   - request: The request; it must not set `Range` (the download sets it to resume).
  ///   - destination: The `file:` URL of the file to create.
  ///   - options: Replacing an existing file, keeping and resuming a partial one.
  ///   - progress: Where to report the bytes written: first at once, then at most once per
  ///     interval, and a final update equal to the file's size, delivered (its closure
  ///     returned) before the promise is fulfilled.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the download, rejected with an `HTTPError` (network, status, time)
  ///   or a `TransferError` (files).
  public func download(
    _ request: HTTPRequest, to destination: URL, options: DownloadOptions = DownloadOptions(),
    progress: TransferProgressHandler? = nil, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPDownload> {
    if request.headers["Range"] != nil {
      return Promise(
        error: HTTPError.invalidRequest(
          "a download sets Range itself, to resume; send(_:) fetches a part of a resource"), file: file,
        line: line)
    }
    let built: URLRequest
    switch prepare(request) {
    case .success(let prepared): built = prepared
    case .failure(let error): return Promise(error: error, file: file, line: line)
    }
    let errorURL = built.url.map { Redaction.url($0, redacting: sensitiveParameters) }
    let recordURL = errorURL?.absoluteString ?? ""
    let downloadFile: DownloadFile
    switch DownloadFile.create(destination: destination, requestURL: recordURL, options: options) {
    case .success(let created): downloadFile = created
    case .failure(let error): return Promise(error: error, file: file, line: line)
    }
    let (promise, resolver) = Promise<HTTPDownload>.pending(file: file, line: line)
    let reporter = progress.map { ProgressReporter($0, defaultQueue: callbackQueue) }
    let idleTimeout = timeout
    var operation: TransferOperation<DownloadSink>?
    let response = send(
      request,
      adjusting: { settings in
        let sink = DownloadSink(
          file: downloadFile, options: options, reporter: reporter, scheduler: settings.scheduler,
          acceptable: settings.machine.acceptable, errorURL: errorURL, recordURL: recordURL,
          idleTimeout: idleTimeout)
        settings.exchange.bodySink = sink
        settings.exchange.decodesContent = false
        // The client's `timeout` is the idle timeout (run by the operation); only the request's
        // own deadline bounds the whole transfer.
        settings.machine.timeout = .endOfTime
        // A compressed body's offsets are not the server's: ask for the bytes as they are, so a
        // download can resume.
        if settings.machine.request.value(forHTTPHeaderField: "Accept-Encoding") == nil {
          settings.machine.request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }
        operation = TransferOperation(
          subject: sink, resolver: resolver, idleTimeout: idleTimeout, scheduler: settings.scheduler,
          queue: settings.callbackQueue, errorURL: errorURL)
        return nil
      }, file: file, line: line)
    guard let operation else {
      // Refused before its settings were made: nothing was sent.
      var unused = downloadFile
      unused.discard(keeping: false, validator: nil, requestURL: recordURL)
      return response.map { _ in throw HTTPError.invalidRequest("the download was refused") }
    }
    operation.start(response)
    return promise
  }

  /// Downloads the body of a `GET` request for `path` to the file at `destination`.
  ///
  /// See `download(_:to:options:progress:file:line:)` for the files, the resuming and the
  /// time limits (the client's `timeout` is an idle timeout for a download; `deadline` bounds
  /// the whole transfer).
  ///
  /// - Parameters:
  ///   - path: Relative to `baseURL`; see `HTTPPath` for untrusted input.
  ///   - destination: The `file:` URL of the file to create.
  ///   - query: Query items, percent-encoded.
  ///   - headers: Header fields for this request (not `Range`).
  ///   - deadline: A bound on the whole transfer, retries included.
  ///   - options: Replacing an existing file, keeping and resuming a partial one.
  ///   - progress: Where to report the bytes written.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the download.
  public func download(
    _ path: String, to destination: URL, query: [URLQueryItem] = [], headers: [String: String] = [:],
    deadline: Deadline? = nil, options: DownloadOptions = DownloadOptions(),
    progress: TransferProgressHandler? = nil, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPDownload> {
    download(
      HTTPRequest(method: .get, path: path, query: query, headers: HTTPHeaders(headers), deadline: deadline),
      to: destination, options: options, progress: progress, file: file, line: line)
  }
}
