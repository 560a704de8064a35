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
}

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
    _ request: URLRequest, settings: ExchangeSettings,
    completion: @escaping @Sendable (Result<HTTPResponse, HTTPError>) -> Void
  ) -> Exchange {
    let task = session.dataTask(with: request)
    // A hop the exchange follows itself holds the transport until its task completes.
    let exchange = Exchange(
      task: task, request: request, requestURL: request.url!, maximumBodySize: settings.maximumBodySize,
      redirectPolicy: settings.redirectPolicy, sensitiveHeaders: settings.sensitiveHeaders,
      sensitiveParameters: settings.sensitiveParameters, bodySink: settings.bodySink,
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
