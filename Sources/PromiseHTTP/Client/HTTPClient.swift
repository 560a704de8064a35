import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Sends HTTP requests relative to a base URL and returns promises of their responses.
///
/// Chains read like the sequential code they replace: `client.post("device/register", json:
/// registration).decode(Token.self).then { token in client.get("stream/config", headers: …) }`.
///
/// A client owns its `URLSession` (an ephemeral one by default: no cookies, no cache, no
/// credential storage shared with anything else) and is `Sendable`: capture it in callbacks.
/// Every request gets the client's protections, which plain `URLSession` on Linux lacks:
/// - a deadline enforced by the client's own timer (`timeout`, or a `Deadline` you pass);
/// - a size limit enforced while the body streams in, decompressed bytes counted;
/// - one list of sensitive headers (`sensitiveHeaders`: `Authorization`, `Cookie`, `X-Api-Key`,
///   …) whose values are redacted from errors and descriptions, and which are removed on a
///   redirect to another scheme, host or port;
/// - one list of secret query parameters, JSON members and form fields
///   (`sensitiveQueryParameters`: `access_token`, `X-Amz-Signature`, `password`, …) whose values
///   are redacted from the URLs and body excerpts of errors, descriptions and log lines;
/// - a redirect policy (`redirectPolicy`: follow at most 10, or none and answer with the 3xx),
///   loop detection, and no redirect to a scheme other than `http` or `https` (`file:`, `data:`);
/// - header fields with CR, LF or other control bytes refused before anything is sent;
/// - a 401 with a `Basic` challenge delivered as a 401, not a hang, while TLS challenges (Apple
///   platforms) get the system's default handling: its certificate validation;
/// - retries by `retryPolicy`, and the token of an `authenticator`, refreshed once on a 401;
/// - at most `maximumConcurrentRequestsPerHost` requests in flight per origin (scheme, host and
///   port); later ones wait in a first-in, first-out queue, at most `maximumQueueWait`, and their
///   deadline starts when they leave it and are sent, not while they wait for a connection.
///
/// A status outside `acceptableStatusCodes` (200–299) rejects with
/// `HTTPError.unacceptableStatus`. Cancelling a returned promise, or the task awaiting its
/// `value`, cancels the `URLSessionTask`; nothing is delivered after that.
///
/// Proxies: both engines read `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy` from the
/// environment of the process, as libcurl does; the socket transport speaks to an `http://`
/// proxy (HTTPS through a `CONNECT` tunnel) and a SOCKS5 one (`socks5://`, `socks5h://`),
/// `URLSession` to the others. FoundationNetworking
/// ignores `URLSessionConfiguration.connectionProxyDictionary` (measured on Swift 6.3.1). To
/// bypass a proxy for some hosts, set `no_proxy` before making the client.
public final class HTTPClient: Sendable {
  /// The configuration the client was made with.
  ///
  /// Its `sessionConfiguration` is the one given; the client's session runs on an adjusted
  /// copy (see `init(baseURL:configuration:)`).
  public let configuration: Configuration
  /// The URL that request paths are relative to.
  public let baseURL: URL
  /// Headers sent with every request; a request's own headers override them.
  ///
  /// The configuration's `defaultHeaders`, under the sensitive `httpAdditionalHeaders` of its
  /// session configuration.
  public let defaultHeaders: HTTPHeaders
  /// The queue the client settles its promises and runs its timers and session delegate on.
  public let callbackQueue: DispatchQueue
  /// The retry policy of every request that does not give its own.
  public var retryPolicy: RetryPolicy { configuration.retryPolicy }
  /// The longest a request may take, retries and backoff included, counted from when it is sent
  /// (when it leaves the queue of `maximumConcurrentRequestsPerHost`).
  public var timeout: Duration { configuration.timeout }
  /// The most requests in flight at once to one origin (scheme, host and port); later requests
  /// wait in a first-in, first-out queue until one finishes.
  ///
  /// A request holds its place from when it is sent until it settles, its retries and their
  /// backoff included. The client's session opens at least this many connections per host.
  public let maximumConcurrentRequestsPerHost: Int
  /// The longest a request waits in the queue for a free place among
  /// `maximumConcurrentRequestsPerHost`; past it the request is rejected with
  /// `HTTPError.queueWaitExceeded` without having been sent.
  public var maximumQueueWait: Duration { configuration.maximumQueueWait }
  /// The largest body accepted, in bytes, counted after decompression.
  public var maximumResponseSize: Int { configuration.maximumResponseSize }
  /// Whether redirects are followed, and how many for one request; see `RedirectPolicy`.
  public var redirectPolicy: RedirectPolicy { configuration.redirectPolicy }
  /// The most redirects followed for one request: the maximum of `redirectPolicy`.
  public var maximumRedirects: Int { redirectPolicy.maximumRedirects }
  /// The headers whose values are credentials: redacted wherever the client shows them, removed
  /// from a redirect to another scheme, host or port, and, among `defaultHeaders`, not sent to an
  /// absolute URL there.
  ///
  /// Names are compared case-insensitively. `Authorization`, `Proxy-Authorization` and
  /// `Cookie` are always in it, whatever the client was given.
  public let sensitiveHeaders: Set<String>
  private let sensitiveNames: HeaderNameSet
  /// The query parameters, JSON members and form fields whose values are credentials: redacted
  /// from the URLs and body excerpts of errors, descriptions and `dump`.
  ///
  /// Names match case-insensitively, and also by their words: `signature` matches
  /// `X-Amz-Signature`, `token` matches `oauth_token` and `accessToken`.
  public var sensitiveQueryParameters: Set<String> { configuration.sensitiveQueryParameters }
  let sensitiveParameters: ParameterNameSet
  /// The statuses that fulfil a request's promise; others reject with `unacceptableStatus`.
  public var acceptableStatusCodes: Range<Int> { configuration.acceptableStatusCodes }
  /// Attaches and refreshes tokens, if set.
  public var authenticator: TokenAuthenticator? { configuration.authenticator }
  private let builder: RequestBuilder
  private let transport: Transport
  private let requestQueue: RequestQueue

  /// 30 s: a mobile connection that has not answered by then will not.
  public static let defaultTimeout: Duration = Configuration.defaultTimeout

  /// 4 MiB: far above a JSON API response, small enough that a hundred concurrent requests,
  /// or a decompression bomb, cannot exhaust memory.
  public static let defaultMaximumResponseSize = Configuration.defaultMaximumResponseSize

  /// 10 redirects: more than any legitimate chain, fewer than a loop would take to notice.
  public static let defaultMaximumRedirects = RedirectPolicy.defaultMaximum

  /// 60 s, twice the default `timeout`: a burst of a few hundred short requests to one host drains
  /// well within it; a request that has waited longer is better reported than sent that late.
  public static let defaultMaximumQueueWait: Duration = Configuration.defaultMaximumQueueWait

  /// `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie` and `X-Api-Key`.
  ///
  /// The credential fields of HTTP itself (RFC 9110 §11.6.2 and §11.7.2, RFC 6265), and the
  /// most common field for an API key. Extend it with the fields your API uses for secrets:
  /// `HTTPClient.defaultSensitiveHeaders.union(["X-Session-Token"])`.
  public static let defaultSensitiveHeaders: Set<String> = HeaderNameSet.defaultNames

  /// The names of query parameters, JSON members and form fields whose values are redacted:
  /// `access_token`, `refresh_token`, `id_token`, `token`, `api_key`, `apikey`, `key`,
  /// `password`, `passwd`, `pwd`, `secret`, `client_secret`, `signature`, `sig`, `code`,
  /// `session`, `auth`, `authorization`, `credential`, `credentials`, `jwt`, `assertion`.
  ///
  /// OAuth 2.0's tokens, codes and client secrets (RFC 6749), the keys and signatures of signed
  /// URLs (`X-Amz-Signature`, `X-Goog-Signature` match `signature` word by word, and
  /// `X-Amz-Security-Token` matches `token`), API keys and passwords. A name matches when it, or
  /// one of its words, is in the list, in any case, so some harmless names are hidden too
  /// (`country_code`, `sort_key`): a log loses a detail, never a secret. Change it with
  /// `HTTPClient.defaultSensitiveQueryParameters.union(["ticket"])` or `.subtracting(["code"])`.
  public static let defaultSensitiveQueryParameters: Set<String> = ParameterNameSet.defaultNames

  /// Returns the configuration a client uses by default: ephemeral, with no cookie storage,
  /// no URL cache and no credential storage, so nothing is shared with other sessions.
  public static func makeDefaultConfiguration() -> URLSessionConfiguration {
    Configuration.makeDefaultSessionConfiguration()
  }

  /// Creates a client for `baseURL` made as `configuration` says; every default by default.
  ///
  /// The client runs its own `URLSession` on a copy of `configuration.sessionConfiguration`,
  /// adjusted in two ways: its `httpAdditionalHeaders` that are among `sensitiveHeaders` become
  /// default headers of the client (under `defaultHeaders`), so they stay with the base URL's
  /// origin (FoundationNetworking would add them to every request and every redirect hop); and
  /// its `httpMaximumConnectionsPerHost`, the default of `maximumConcurrentRequestsPerHost`, is
  /// raised to that limit when lower, so that a request the client sends gets a connection.
  ///
  /// - Parameters:
  ///   - baseURL: The URL that paths are relative to, for example `https://api.example.com/v1/`.
  ///   - configuration: The settings; `Configuration()` (every documented default) by default.
  public init(baseURL: URL, configuration: Configuration = Configuration()) {
    let queue = configuration.callbackQueue ?? DispatchQueue(label: "PromiseHTTP.HTTPClient")
    self.configuration = configuration
    self.baseURL = baseURL
    self.callbackQueue = queue
    self.sensitiveHeaders = HeaderNameSet.withAlwaysSensitive(configuration.sensitiveHeaders)
    let sensitiveNames = HeaderNameSet(sensitive: configuration.sensitiveHeaders)
    self.sensitiveNames = sensitiveNames
    let sensitiveParameters = ParameterNameSet(configuration.sensitiveQueryParameters)
    self.sensitiveParameters = sensitiveParameters
    let session = configuration.sessionConfiguration.copy() as? URLSessionConfiguration ?? .ephemeral
    let limit = max(
      1, configuration.maximumConcurrentRequestsPerHost ?? session.httpMaximumConnectionsPerHost)
    // A request the queue lets through must get a connection at once, or its deadline would
    // run while it waits inside libcurl: the very wait the queue exists to keep out of it.
    session.httpMaximumConnectionsPerHost = max(session.httpMaximumConnectionsPerHost, limit)
    self.maximumConcurrentRequestsPerHost = limit
    self.requestQueue = RequestQueue(limit: limit)
    let defaultHeaders = Redirects.takeSensitiveHeaders(
      from: session, sensitive: sensitiveNames, under: configuration.defaultHeaders)
    self.defaultHeaders = defaultHeaders
    self.builder = RequestBuilder(
      baseURL: baseURL, defaultHeaders: defaultHeaders, sensitiveHeaders: sensitiveNames,
      sensitiveParameters: sensitiveParameters)
    self.transport = Transport(
      configuration: session, callbackQueue: queue,
      socketTransport: configuration.engine == .automatic, trust: configuration.serverTrust,
      clientCertificate: configuration.clientCertificate, environment: configuration.proxyEnvironment)
  }

  /// Creates a client that uses the configuration of `session`: its cookie storage, cache,
  /// credential storage, additional headers (the sensitive ones sent to the base URL's origin
  /// only) and timeouts, in place of `configuration.sessionConfiguration`.
  ///
  /// The client still runs its requests on a session of its own, made from that
  /// configuration: it needs its own session delegate (to stream, limit and redirect), and
  /// FoundationNetworking honours neither a second delegate nor per-task delegates. `session`
  /// itself and its delegate are not used.
  ///
  /// - Parameters:
  ///   - baseURL: The URL that paths are relative to.
  ///   - session: The session whose configuration the client copies.
  ///   - configuration: The other settings; every documented default by default.
  public convenience init(baseURL: URL, session: URLSession, configuration: Configuration = Configuration()) {
    var configuration = configuration
    configuration.sessionConfiguration = session.configuration
    self.init(baseURL: baseURL, configuration: configuration)
  }

  // MARK: Sending

  /// Sends `request` and returns a promise of its response.
  ///
  /// The promise is fulfilled with a response whose status is acceptable, after any retries;
  /// it is rejected with an `HTTPError` otherwise, or with `CancellationError` when cancelled.
  /// Nothing is sent when the request is invalid: the promise is rejected with
  /// `HTTPError.invalidRequest` at once.
  ///
  /// When `maximumConcurrentRequestsPerHost` requests to the same origin are in flight, the
  /// request waits for one of them to settle (first in, first out). `timeout` counts from when
  /// it is sent; a request's own `deadline` is a point in time and runs while it waits too
  /// (`HTTPError.timedOut`). After `maximumQueueWait` in the queue the promise is rejected with
  /// `HTTPError.queueWaitExceeded`; cancelling it takes it out of the queue. Neither sent it.
  ///
  /// - Parameters:
  ///   - request: The request to send.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the response, rejected with an `HTTPError` on failure.
  public func send(
    _ request: HTTPRequest, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(request, adjusting: nil, file: file, line: line)
  }

  /// Sends `request` as `send(_:)` does, with its settings adjusted by `adjust` once they are
  /// resolved (a transfer's body sink or upload body, say); `adjust` may refuse the request.
  func send(
    _ request: HTTPRequest, adjusting adjust: ((inout RequestSettings) -> HTTPError?)?, file: StaticString,
    line: UInt
  ) -> Promise<HTTPResponse> {
    let urlRequest: URLRequest
    switch prepare(request) {
    case .success(let prepared): urlRequest = prepared
    case .failure(let error): return Promise(error: error, file: file, line: line)
    }
    let acceptable = request.acceptableStatusCodes ?? acceptableStatusCodes
    // The token goes to the base URL's origin only, and not over an `Authorization` of its own.
    let authenticates =
      urlRequest.url.map({ Redirects.isSameOrigin($0, baseURL) }) == true
      && urlRequest.value(forHTTPHeaderField: "Authorization") == nil
    let chain = InterceptorChain(
      authenticator: authenticates ? authenticator : nil, interceptors: configuration.interceptors,
      retryPolicy: request.retryPolicy ?? retryPolicy, queue: callbackQueue)
    var settings = RequestSettings(
      machine: RequestStateMachine.Settings(
        request: urlRequest, method: request.method, acceptable: acceptable, timeout: timeout,
        maximumQueueWait: maximumQueueWait, deadlineAllowed: request.deadline?.allowed,
        sensitiveParameters: sensitiveParameters),
      exchange: ExchangeSettings(
        maximumBodySize: maximumResponseSize, redirectPolicy: request.redirectPolicy ?? redirectPolicy,
        sensitiveHeaders: sensitiveNames, sensitiveParameters: sensitiveParameters),
      deadline: request.deadline, chain: chain, scheduler: configuration.scheduler,
      callbackQueue: callbackQueue)
    // Decoded as `URLSession` decodes it; a download or a stream takes the body as sent.
    settings.exchange.decodesContent = true
    if let adjust, let error = adjust(&settings) { return Promise(error: error, file: file, line: line) }
    let (promise, resolver) = Promise<HTTPResponse>.pending(file: file, line: line)
    let operation = RequestOperation(
      settings: settings, transport: transport, queue: requestQueue, resolver: resolver)
    resolver.onCancel { operation.cancel() }
    operation.enqueue()
    return promise
  }

  /// Sends a `GET` request for `path` and returns a promise of the response.
  ///
  /// - Parameters:
  ///   - path: Relative to `baseURL`, for example `"stream/config"`; see `HTTPPath` for untrusted input.
  ///   - query: Query items, percent-encoded.
  ///   - headers: Header fields for this request.
  ///   - deadline: A deadline shared by a chain of requests, on top of `timeout`.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the response, rejected with an `HTTPError` on failure.
  public func get(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(
      HTTPRequest(method: .get, path: path, query: query, headers: HTTPHeaders(headers), deadline: deadline),
      file: file, line: line)
  }

  /// Sends a `HEAD` request for `path`; the response has headers and no body.
  public func head(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(
      HTTPRequest(method: .head, path: path, query: query, headers: HTTPHeaders(headers), deadline: deadline),
      file: file, line: line)
  }

  /// Sends a `DELETE` request for `path`.
  public func delete(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(
      HTTPRequest(
        method: .delete, path: path, query: query, headers: HTTPHeaders(headers), deadline: deadline),
      file: file, line: line)
  }

  /// Sends a `POST` request with `body` (none by default: an empty body, `Content-Length: 0`).
  public func post(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], body: Data = Data(),
    deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(withBody: .post, path, query, headers, body, deadline, file, line)
  }

  /// Sends a `POST` request with `json` encoded as JSON (`Content-Type: application/json`).
  ///
  /// An encoding failure rejects the promise with `HTTPError.invalidRequest`; nothing is sent.
  public func post(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], json: some Encodable,
    encoder: JSONEncoder = JSONEncoder(), deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(withJSON: .post, path, query, headers, json, encoder, deadline, file, line)
  }

  /// Sends a `PUT` request with `body` (none by default: an empty body, `Content-Length: 0`).
  public func put(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], body: Data = Data(),
    deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(withBody: .put, path, query, headers, body, deadline, file, line)
  }

  /// Sends a `PUT` request with `json` encoded as JSON.
  public func put(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], json: some Encodable,
    encoder: JSONEncoder = JSONEncoder(), deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(withJSON: .put, path, query, headers, json, encoder, deadline, file, line)
  }

  /// Sends a `PATCH` request with `body` (none by default: an empty body, `Content-Length: 0`).
  public func patch(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], body: Data = Data(),
    deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(withBody: .patch, path, query, headers, body, deadline, file, line)
  }

  /// Sends a `PATCH` request with `json` encoded as JSON.
  public func patch(
    _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:], json: some Encodable,
    encoder: JSONEncoder = JSONEncoder(), deadline: Deadline? = nil,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    send(withJSON: .patch, path, query, headers, json, encoder, deadline, file, line)
  }

  private func send(
    withBody method: HTTPMethod, _ path: String, _ query: [URLQueryItem], _ headers: [String: String],
    _ body: Data, _ deadline: Deadline?, _ file: StaticString, _ line: UInt
  ) -> Promise<HTTPResponse> {
    send(
      HTTPRequest(
        method: method, path: path, query: query, headers: HTTPHeaders(headers), body: body,
        deadline: deadline), file: file, line: line)
  }

  private func send(
    withJSON method: HTTPMethod, _ path: String, _ query: [URLQueryItem], _ headers: [String: String],
    _ value: some Encodable, _ encoder: JSONEncoder, _ deadline: Deadline?, _ file: StaticString,
    _ line: UInt
  ) -> Promise<HTTPResponse> {
    let body: Data
    do {
      body = try encoder.encode(value)
    } catch {
      return Promise(
        error: HTTPError.invalidRequest("could not encode \(type(of: value)) as JSON: \(error)"), file: file,
        line: line)
    }
    var fields = HTTPHeaders(headers)
    if fields["Content-Type"] == nil { fields["Content-Type"] = "application/json" }
    return send(
      HTTPRequest(
        method: method, path: path, query: query, headers: fields, body: body, deadline: deadline),
      file: file, line: line)
  }

  // MARK: Preparing

  /// Builds the `URLRequest`, or the reason it must not be sent (see `RequestBuilder`).
  func prepare(_ request: HTTPRequest) -> Result<URLRequest, HTTPError> {
    builder.urlRequest(for: request)
  }

  /// Whether `request` goes over the socket transport rather than `URLSession` (see `Engine`).
  func socketTransportServes(_ request: URLRequest) -> Bool {
    transport.socketSettings.serves(request)
  }
}

extension HTTPClient: CustomStringConvertible, CustomReflectable {
  /// The base URL (without user-info or secret query values) and the main settings; never a
  /// credential.
  public var description: String {
    "HTTPClient(\(Redaction.text(baseURL, parameters: sensitiveParameters)), timeout: \(timeout), maximumResponseSize: \(maximumResponseSize))"
  }

  /// A mirror with the base URL's user-info, secret query values and credential headers
  /// redacted, for `dump`.
  public var customMirror: Mirror {
    Mirror(
      self,
      children: [
        "baseURL": Redaction.text(baseURL, parameters: sensitiveParameters),
        "defaultHeaders": defaultHeaders.redacting(sensitiveNames, parameters: sensitiveParameters),
        "timeout": timeout, "maximumConcurrentRequestsPerHost": maximumConcurrentRequestsPerHost,
        "maximumQueueWait": maximumQueueWait, "maximumResponseSize": maximumResponseSize,
        "redirectPolicy": redirectPolicy,
        "sensitiveHeaders": sensitiveHeaders.sorted(),
        "sensitiveQueryParameters": sensitiveQueryParameters.sorted(),
        "acceptableStatusCodes": acceptableStatusCodes, "authenticator": authenticator as Any,
      ], displayStyle: .class)
  }
}
