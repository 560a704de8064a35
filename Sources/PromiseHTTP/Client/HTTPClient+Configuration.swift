import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

extension HTTPClient {
  /// Which HTTP engine carries a client's requests: `Configuration.engine`.
  public enum Engine: Sendable, Hashable {
    /// On Linux, the library's own HTTP/1.1 engine (the socket transport) carries every request
    /// it can serve — `get`, `send`, downloads, uploads, streams; plain HTTP, and HTTPS through
    /// the system's OpenSSL 3 — and `URLSession` carries the rest.
    ///
    /// The socket transport keeps connections alive per origin (as many idle ones as the
    /// session's `httpMaximumConnectionsPerHost`, for at most 30 s or what the server's
    /// `Keep-Alive` says) and reuses one only after a response read to its framed end; one the
    /// server closed or wrote to while idle is never read as the next answer. An ordinary
    /// request asks for `gzip, deflate, br, zstd` and gets its body decoded, as `URLSession` does, the size
    /// limit counted on the decoded bytes; a transfer asks for `identity` and passes on a body
    /// sent encoded anyway as it arrived (like `curl -o`). A transfer's body moves at the pace
    /// of the file, the sequence or the reader, so memory stays flat.
    ///
    /// The socket transport goes through an `http://` or SOCKS5 (`socks5://`, `socks5h://`)
    /// proxy that the `http_proxy`, `https_proxy` or `all_proxy` environment variables name (for
    /// a host `no_proxy` does not exempt): through an HTTP proxy, plain HTTP forwarded and HTTPS
    /// in a `CONNECT` tunnel; through SOCKS5, both in its tunnel. `URLSession` carries: a
    /// proxy of another kind (`https://`, `socks4://`) or the session's own, credentials in
    /// the URL, a session with protocol classes of your own, a request with a body stream, HTTPS
    /// where OpenSSL 3 cannot be loaded, and everything on Apple platforms, where the socket
    /// transport does not build. The socket transport sends the session's
    /// `httpAdditionalHeaders` and uses its cookie storage, as the session would; it does not
    /// use the session's cache.
    case automatic
    /// Every request goes through the client's `URLSession`, transfers too: a streamed body the
    /// reader has not taken then waits in a temporary file, and a `.stream` upload is written to
    /// a temporary file before it is sent.
    case urlSession
  }

  /// The engine choice under its former name, from when it applied to transfers only.
  @available(*, deprecated, renamed: "HTTPClient.Engine")
  public typealias TransferTransport = Engine

  /// Everything a client is made with, as one value: build it, change what you need, pass it.
  ///
  /// Every property starts at its documented default (the `static let`s of `HTTPClient`), so
  /// `HTTPClient(baseURL: url)` and `HTTPClient(baseURL: url, configuration: .init())` are the
  /// same client. Change fields in place or with the initializer's labels:
  /// `HTTPClient.Configuration(retryPolicy: .none, timeout: .seconds(5))`.
  ///
  /// The client reads the configuration once, when it is made; changing the value afterwards
  /// changes nothing for that client.
  public struct Configuration: Sendable {
    /// The configuration of the client's `URLSession`; `HTTPClient.makeDefaultConfiguration()`
    /// (ephemeral, nothing shared) by default.
    ///
    /// A reference, as `URLSessionConfiguration` is a class: change it in place
    /// (`configuration.sessionConfiguration.timeoutIntervalForResource = 60`) before making the
    /// client. The client copies it when it is made, so later changes reach no client made
    /// already; it adjusts its copy (see `HTTPClient.init(baseURL:configuration:)`).
    public var sessionConfiguration: URLSessionConfiguration
    /// Headers sent with every request; a request's own headers override them.
    public var defaultHeaders: HTTPHeaders
    /// Where the client settles promises and runs its timers and session delegate; a private
    /// serial queue when `nil` (the default).
    public var callbackQueue: DispatchQueue?
    /// The retry policy of every request that does not give its own; `RetryPolicy.default`.
    public var retryPolicy: RetryPolicy
    /// The longest a request may take, retries and backoff included, from when it is sent (when
    /// it leaves the queue of `maximumConcurrentRequestsPerHost`); `HTTPClient.defaultTimeout`.
    public var timeout: Duration
    /// The most requests in flight at once per origin, at least 1.
    ///
    /// `nil` (the default) takes the session configuration's `httpMaximumConnectionsPerHost`
    /// (6 on Linux).
    public var maximumConcurrentRequestsPerHost: Int?
    /// The longest a request waits for its turn before it is rejected, unsent, with
    /// `HTTPError.queueWaitExceeded`; `HTTPClient.defaultMaximumQueueWait`.
    public var maximumQueueWait: Duration
    /// The body size limit, counted after decompression; `HTTPClient.defaultMaximumResponseSize`.
    public var maximumResponseSize: Int
    /// Whether redirects are followed, and how many; `RedirectPolicy.default` (at most 10).
    public var redirectPolicy: RedirectPolicy
    /// The headers whose values are credentials; `HTTPClient.defaultSensitiveHeaders`.
    ///
    /// `Authorization`, `Proxy-Authorization` and `Cookie` are always treated as sensitive.
    public var sensitiveHeaders: Set<String>
    /// The query parameters, JSON members and form fields whose values are credentials,
    /// redacted from errors, descriptions and `dump`; `HTTPClient.defaultSensitiveQueryParameters`.
    ///
    /// Names match case-insensitively and word by word (`signature` matches `X-Amz-Signature`).
    /// An `HTTPError` made by the client keeps its URL and body excerpt redacted by this list;
    /// its description redacts by the default list too, as an error does not know its client.
    public var sensitiveQueryParameters: Set<String>
    /// The statuses that fulfil a request's promise; 200–299.
    public var acceptableStatusCodes: Range<Int>
    /// Attaches a token to each request to the base URL's origin and refreshes it once on a 401.
    ///
    /// The first step of every request to that origin, unless the request sets `Authorization`
    /// itself (see `HTTPInterceptor`).
    public var authenticator: TokenAuthenticator?
    /// Steps of your own that every request goes through, in order: after the authenticator,
    /// before the retry policy (see `HTTPInterceptor`); none by default.
    public var interceptors: [any HTTPInterceptor]
    /// The clock of the client's timers: deadlines, the queue-wait limit and retry backoff;
    /// `PromiseSchedulers.default` (real time) by default.
    ///
    /// Pass a `VirtualTimeScheduler` in tests: a deadline then passes when you advance it, not
    /// after a wall-clock wait. A request's own `Deadline` is a point in real time: the client
    /// reads what is left of it when the request is queued and when it is sent, and from then
    /// on counts that on this scheduler. libcurl's own whole-second timeout, set just beyond
    /// the client's deadline as a backstop, is always real time.
    public var scheduler: any PromiseScheduler
    /// Which engine carries the client's requests; `.automatic`.
    ///
    /// `.automatic` is, on Linux, the socket transport wherever it can serve and `URLSession`
    /// elsewhere (see `HTTPClient.Engine`); `.urlSession` sends every request through the session.
    public var engine: Engine = .automatic
    /// The engine under its former name.
    @available(*, deprecated, renamed: "engine")
    public var transferTransport: Engine {
      get { engine }
      set { engine = newValue }
    }
    /// What HTTPS certificates are trusted beyond the system's trust store: authorities of your
    /// own and per-host key pins; `.system` (none).
    ///
    /// The socket transport honours it; `URLSession` cannot, so a request to a pinned host that
    /// would go through it fails instead of going unpinned (see `HTTPClient.ServerTrust`).
    public var serverTrust: ServerTrust = .system
    /// The certificate and key the client presents to an HTTPS server that asks for one; `nil`
    /// (none) by default.
    ///
    /// The socket transport presents it; `URLSession` cannot, so an HTTPS request that would go
    /// through it fails instead of going without (see `HTTPClient.ClientCertificate`).
    public var clientCertificate: ClientCertificate? = nil
    /// The proxy variables the socket transport reads instead of the process's environment.
    ///
    /// `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy`: for tests, which cannot change
    /// the process's environment while other tests run. `URLSession` reads the process's.
    var proxyEnvironment: [String: String]? = nil

    /// `HTTPClient.defaultTimeout`, where its rationale is.
    @usableFromInline static let defaultTimeout: Duration = .seconds(30)
    /// `HTTPClient.defaultMaximumResponseSize`, where its rationale is.
    @usableFromInline static let defaultMaximumResponseSize = 4 << 20
    /// `HTTPClient.defaultMaximumQueueWait`, where its rationale is.
    @usableFromInline static let defaultMaximumQueueWait: Duration = .seconds(60)

    /// `HTTPClient.makeDefaultConfiguration()`: ephemeral, nothing shared with other sessions.
    @usableFromInline
    static func makeDefaultSessionConfiguration() -> URLSessionConfiguration {
      let configuration = URLSessionConfiguration.ephemeral
      configuration.httpCookieStorage = nil
      configuration.httpShouldSetCookies = false
      configuration.httpCookieAcceptPolicy = .never
      configuration.urlCache = nil
      configuration.urlCredentialStorage = nil
      configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
      return configuration
    }

    /// Creates a configuration; every parameter defaults to the documented default.
    ///
    /// - Parameters:
    ///   - sessionConfiguration: The session's configuration, copied by the client; ephemeral by default.
    ///   - defaultHeaders: Sent with every request.
    ///   - callbackQueue: Where the client settles promises; a private serial queue by default.
    ///   - retryPolicy: `RetryPolicy.default`: idempotent methods, 3 attempts.
    ///   - timeout: The deadline of each request, retries included, from when it is sent; 30 s.
    ///   - maximumConcurrentRequestsPerHost: The most requests in flight per origin; `nil` takes
    ///     the session configuration's `httpMaximumConnectionsPerHost`.
    ///   - maximumQueueWait: The longest a request waits for its turn; 60 s.
    ///   - maximumResponseSize: The body size limit after decompression; 4 MiB.
    ///   - redirectPolicy: Follow at most 10 redirects (`RedirectPolicy.default`), or none.
    ///   - sensitiveHeaders: The headers redacted and kept from other origins.
    ///   - sensitiveQueryParameters: The query parameters, JSON members and form fields redacted.
    ///   - acceptableStatusCodes: The statuses that fulfil; 200–299.
    ///   - authenticator: Attaches a token to each request and refreshes it on a 401.
    ///   - interceptors: Steps of your own, in order; none by default.
    ///   - scheduler: The clock of deadlines, queue waits and backoff; `PromiseSchedulers.default`.
    public init(
      sessionConfiguration: URLSessionConfiguration = Configuration.makeDefaultSessionConfiguration(),
      defaultHeaders: HTTPHeaders = [:], callbackQueue: DispatchQueue? = nil,
      retryPolicy: RetryPolicy = .default, timeout: Duration = Configuration.defaultTimeout,
      maximumConcurrentRequestsPerHost: Int? = nil,
      maximumQueueWait: Duration = Configuration.defaultMaximumQueueWait,
      maximumResponseSize: Int = Configuration.defaultMaximumResponseSize,
      redirectPolicy: RedirectPolicy = .default,
      sensitiveHeaders: Set<String> = HeaderNameSet.defaultNames,
      sensitiveQueryParameters: Set<String> = ParameterNameSet.defaultNames,
      acceptableStatusCodes: Range<Int> = 200..<300, authenticator: TokenAuthenticator? = nil,
      interceptors: [any HTTPInterceptor] = [], scheduler: any PromiseScheduler = PromiseSchedulers.default
    ) {
      self.sessionConfiguration = sessionConfiguration
      self.defaultHeaders = defaultHeaders
      self.callbackQueue = callbackQueue
      self.retryPolicy = retryPolicy
      self.timeout = timeout
      self.maximumConcurrentRequestsPerHost = maximumConcurrentRequestsPerHost
      self.maximumQueueWait = maximumQueueWait
      self.maximumResponseSize = maximumResponseSize
      self.redirectPolicy = redirectPolicy
      self.sensitiveHeaders = sensitiveHeaders
      self.sensitiveQueryParameters = sensitiveQueryParameters
      self.acceptableStatusCodes = acceptableStatusCodes
      self.authenticator = authenticator
      self.interceptors = interceptors
      self.scheduler = scheduler
    }

  }
}
