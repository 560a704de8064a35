import Foundation
import Promises

extension HTTPClient {
  /// Sends `request` and returns a promise fulfilled when the response's head arrives; the body
  /// follows as a stream (`HTTPStreamingResponse.body`, `.lines`).
  ///
  /// Until the head of an acceptable status arrives, the request is sent as `send` sends it:
  /// it waits for a per-host slot, the request's `RetryPolicy` retries a failed attempt or a
  /// retryable status, and an unacceptable status rejects the promise with
  /// `HTTPError.unacceptableStatus` and its body's excerpt. Once the head is delivered:
  /// - nothing is retried: a connection cut mid-body ends the stream with that `HTTPError`;
  /// - the client's `timeout` stops applying to the whole (a server-sent-event stream may last
  ///   hours), and bounds each silence instead: no byte for longer than `timeout` (rounded up
  ///   to a whole second) ends the stream with `HTTPError.transport` (`.timedOut`);
  /// - the request's own `deadline`, if it has one, still bounds the whole stream: a deadline
  ///   is a point in time its caller chose for the whole work (`HTTPError.timedOut`);
  /// - the per-host slot stays taken until the body ends, fails or is abandoned.
  ///
  /// Stopping early — `break`, the reading task cancelled, `cancel()`, or the response
  /// released unread — cancels the request. Cancelling the promise before the head cancels the
  /// request too. A body needs no `maximumResponseSize`: it is never held whole (see
  /// `HTTPBodyStream` for the memory it uses).
  ///
  /// - Parameters:
  ///   - request: The request to send.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the streaming response, rejected with an `HTTPError` on failure
  ///   before the head.
  public func stream(
    _ request: HTTPRequest, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPStreamingResponse> {
    stream(
      request, bufferSize: HTTPBodyStream.defaultBufferSize, spillLimit: HTTPBodyStream.defaultSpillLimit,
      file: file, line: line)
  }

  /// Sends a `GET` request for `path` and returns a promise of the response's head; the body
  /// follows as a stream (see `stream(_:file:line:)`).
  ///
  /// - Parameters:
  ///   - path: Relative to `baseURL`, for example `"events"`; see `HTTPPath` for untrusted input.
  ///   - query: Query items, percent-encoded.
  ///   - headers: Header fields for this request (`Accept: text/event-stream`, say).
  ///   - deadline: A deadline for the whole stream, on top of `timeout` until the head.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the streaming response, rejected with an `HTTPError` on failure
  ///   before the head.
  public func stream(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPStreamingResponse> {
    stream(
      HTTPRequest(method: .get, path: path, query: query, headers: HTTPHeaders(headers), deadline: deadline),
      file: file, line: line)
  }

  /// `stream(_:file:line:)` with the buffer's limits given: at most `bufferSize` bytes in
  /// memory, `spillLimit` on disk (tests use small ones).
  func stream(
    _ request: HTTPRequest, bufferSize: Int, spillLimit: Int64, file: StaticString, line: UInt
  ) -> Promise<HTTPStreamingResponse> {
    let stream = ResponseStream(highWaterMark: bufferSize, spillLimit: spillLimit)
    let (promise, resolver) = Promise<HTTPStreamingResponse>.pending(file: file, line: line)
    let sink = LockedBox<ResponseStreamSink?>(nil)
    let response = send(
      request,
      adjusting: { settings in
        let made = ResponseStreamSink(stream: stream, head: resolver, settings: settings)
        settings.exchange.bodySink = made
        // Over plain HTTP the body is read from a socket only as fast as the reader takes it.
        settings.exchange.decodesContent = false
        sink.withLock { $0 = made }
        return nil
      }, file: file, line: line)
    stream.attach(cancelRequest: { response.cancel() })
    resolver.onCancel { response.cancel() }
    // The sink's resolver, not `resolver`: once the head is delivered, nothing here may keep
    // the response (and so its stream) alive, or releasing it would not cancel the request.
    let head = sink.withLock { $0 }?.takeHeadLater
    response.whenSettled(on: callbackQueue) { result in
      let pending = head?()
      switch result {
      case .success(let whole):
        // No head went through the sink (a `HEAD` request): the response is whole.
        if let pending {
          stream.append(whole.body)
          var head = HTTPResponse(
            statusCode: whole.statusCode, headers: whole.headers, requestURL: whole.requestURL, url: whole.url
          )
          head.sensitiveParameters = whole.sensitiveParameters
          pending.fulfill(HTTPStreamingResponse(head: head, stream: stream))
        }
        stream.finish(.finished)
      case .failure(let error):
        stream.finish(.failed(error))
        pending?.reject(error)
      }
    }
    // Refused before anything was made (an invalid request): `send` rejected at once.
    if head == nil {
      response.whenSettled(on: callbackQueue) { result in
        if case .failure(let error) = result { resolver.reject(error) }
      }
    }
    return promise
  }
}

extension ResponseStreamSink {
  /// `takeHead` as a closure that holds the sink, not the resolver.
  fileprivate var takeHeadLater: @Sendable () -> Promise<HTTPStreamingResponse>.Resolver? {
    { [self] in takeHead() }
  }
}
