import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What a `ResponseBodySink` does with the body of a response whose head has arrived.
enum ResponseBodyDecision: Sendable {
  /// Collect the body in memory, as without a sink, under the client's size limit (an error
  /// status's body, kept for `HTTPError.unacceptableStatus`).
  case collect
  /// Hand every chunk to the sink's `write`; the body is not counted against the size limit
  /// and the response is delivered with an empty `body`.
  case consume
  /// End the exchange with this error; the task is stopped.
  case fail(HTTPError)
}

/// Where the body of a final response goes instead of memory: a file, a stream to a reader.
///
/// One sink serves every attempt of a request (its retries): `prepare` sees each attempt's
/// request before it is sent, `begin` each final response head (not a 3xx being followed),
/// `write` each chunk of a consumed body, in order. `begin` and `write` run on the session's
/// delegate queue, one at a time and outside the exchange's lock; `write` may still be called
/// once after the exchange was cancelled, and must then do nothing harmful.
protocol ResponseBodySink: AnyObject, Sendable {
  /// Returns the request of an attempt, adapted (a `Range` header to resume, say).
  func prepare(_ request: URLRequest) -> URLRequest
  /// The head of the response whose body follows: decides where the body goes.
  func begin(_ response: HTTPURLResponse) -> ResponseBodyDecision
  /// Takes body bytes (decompressed) of a consumed body; returns an error to end the exchange
  /// with it (the task is cancelled).
  func write(_ data: Data) -> HTTPError?
  /// Takes body bytes as `write(_:)` does; with `mayWait`, the caller is a thread that may be
  /// held until the sink has room (the socket transport's), which holds the server back.
  func write(_ data: Data, mayWait: Bool) -> HTTPError?
}

extension ResponseBodySink {
  func write(_ data: Data, mayWait: Bool) -> HTTPError? {
    write(data)
  }
}
