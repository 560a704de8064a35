import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The body sink of `HTTPClient.stream`: delivers the head of an acceptable response to the
/// promise and hands its body to a `ResponseStream`; an unacceptable one is collected as
/// `send` collects it (for the excerpt of `HTTPError.unacceptableStatus`), and may be retried.
///
/// Taking a response commits the request to it (`CommittingBodySink`): no retry after that,
/// and the client's `timeout` stops applying.
final class ResponseStreamSink: CommittingBodySink {
  private struct State: Sendable {
    /// Settles the promise of the head; taken when the head is delivered, so that nothing
    /// the request holds keeps the response (and so its stream) alive.
    var head: Promise<HTTPStreamingResponse>.Resolver?
    var commit: (@Sendable () -> Void)?
  }

  let stream: ResponseStream
  private let state: LockedBox<State>
  private let acceptable: Range<Int>
  private let requestURL: URL
  private let sensitiveHeaders: HeaderNameSet
  private let sensitiveParameters: ParameterNameSet
  /// libcurl's timeout, which FoundationNetworking restarts at every chunk: the longest
  /// silence of a body.
  private let idleTimeoutInterval: TimeInterval

  init(
    stream: ResponseStream, head: Promise<HTTPStreamingResponse>.Resolver, settings: RequestSettings
  ) {
    self.stream = stream
    self.state = LockedBox(State(head: head))
    self.acceptable = settings.machine.acceptable
    self.requestURL = settings.machine.request.url!
    self.sensitiveHeaders = settings.exchange.sensitiveHeaders
    self.sensitiveParameters = settings.exchange.sensitiveParameters
    self.idleTimeoutInterval = RequestStateMachine.transportTimeoutInterval(
      remaining: settings.machine.timeout)
  }

  func attach(commit: @escaping @Sendable () -> Void) {
    state.withLock { $0.commit = commit }
  }

  /// Takes the resolver of the head, if it has not been taken: the request's end settles the
  /// promise when no head was delivered (a `HEAD`, a failure).
  func takeHead() -> Promise<HTTPStreamingResponse>.Resolver? {
    state.withLock { state in
      defer { state.head = nil }
      return state.head
    }
  }

  func prepare(_ request: URLRequest) -> URLRequest {
    // Before the head the client's own deadline comes first; after it, this bounds each
    // silence of the body (FoundationNetworking restarts it at every chunk).
    var request = request
    request.timeoutInterval = idleTimeoutInterval
    return request
  }

  func begin(_ response: HTTPURLResponse) -> ResponseBodyDecision {
    guard acceptable.contains(response.statusCode) else { return .collect }
    let (resolver, commit) = state.withLock { state in
      defer {
        state.head = nil
        state.commit = nil
      }
      return (state.head, state.commit)
    }
    // Cancelled before its head: the request is being cancelled.
    guard let resolver else { return .fail(.transportFailure(URLError(.cancelled), url: requestURL)) }
    commit?()
    let head = ExchangeStateMachine<URLSessionDataTask>.makeResponse(
      response, body: Data(), requestURL: requestURL, sensitiveHeaders: sensitiveHeaders,
      sensitiveParameters: sensitiveParameters)
    resolver.fulfill(HTTPStreamingResponse(head: head, stream: stream))
    return .consume
  }

  func write(_ data: Data) -> HTTPError? {
    write(data, mayWait: false)
  }

  func write(_ data: Data, mayWait: Bool) -> HTTPError? {
    stream.append(data, waitingForRoom: mayWait)
    return nil
  }
}
