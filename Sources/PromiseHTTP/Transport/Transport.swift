import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A client's `URLSession` with its delegate; the session is invalidated when the last user goes.
///
/// Requests in flight keep the transport alive, so a client released mid-request still
/// completes it; the session is then invalidated and releases its delegate.
final class Transport: Sendable {
  let session: URLSession
  let delegate: SessionDelegate

  init(configuration: URLSessionConfiguration, callbackQueue: DispatchQueue) {
    let delegate = SessionDelegate()
    let operations = OperationQueue()
    operations.name = "PromiseHTTP.session"
    operations.maxConcurrentOperationCount = 1
    operations.underlyingQueue = callbackQueue
    self.delegate = delegate
    self.session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: operations)
  }

  deinit {
    session.finishTasksAndInvalidate()
  }

  /// Starts a data task for `request`; `completion` runs once unless the exchange is cancelled.
  func start(
    _ request: URLRequest, maximumBodySize: Int, redirectPolicy: RedirectPolicy,
    sensitiveHeaders: HeaderNameSet, sensitiveParameters: ParameterNameSet,
    completion: @escaping @Sendable (Result<HTTPResponse, HTTPError>) -> Void
  ) -> Exchange {
    let task = session.dataTask(with: request)
    // A hop the exchange follows itself holds the transport until its task completes.
    let exchange = Exchange(
      task: task, request: request, requestURL: request.url!, maximumBodySize: maximumBodySize,
      redirectPolicy: redirectPolicy, sensitiveHeaders: sensitiveHeaders,
      sensitiveParameters: sensitiveParameters,
      startTask: { [self] hop, exchange in
        let task = session.dataTask(with: hop)
        delegate.add(exchange, for: task)
        return task
      },
      completion: completion)
    delegate.add(exchange, for: task)
    task.resume()
    return exchange
  }
}
