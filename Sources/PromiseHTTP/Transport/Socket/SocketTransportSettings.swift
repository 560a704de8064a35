import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What the socket transport needs of a client's session configuration, read once.
struct SocketTransportSettings: Sendable {
  /// Whether the socket transport may serve a client's requests at all: no proxy in the
  /// session's configuration, no protocol class of the caller's, and not turned off.
  var isAvailable: Bool
  /// `URLSessionConfiguration.httpAdditionalHeaders`, sent unless the request sets the field.
  var additionalHeaders: [(name: String, value: String)]
  /// Where cookies come from and go to, as FoundationNetworking would use them; `nil` for none.
  var cookieStorage: HTTPCookieStorage?
  /// Whether responses' cookies are stored (the storage's accept policy is not `.never`).
  var acceptsCookies: Bool
  /// The hosts libcurl reaches without the environment's proxy (`no_proxy`).
  var proxyExemptions: [String]
  /// Where plain HTTP goes unless `proxyExemptions` cover the host: the environment's proxy
  /// (`http_proxy`, else `all_proxy`), `.unsupported` when it is one only `URLSession` speaks
  /// (see `Proxy`), `.direct` when none is named.
  var httpRoute: Route
  /// The same for HTTPS (`https_proxy`, else `all_proxy`), which goes through a proxy in a
  /// tunnel (`CONNECT`, or SOCKS5's).
  var httpsRoute: Route
  /// The client's TLS set-up for HTTPS, made on the first HTTPS request.
  var tls: TLSContextCache
  /// The client's kept-alive connections: as many idle per origin as the session's
  /// `httpMaximumConnectionsPerHost`.
  var pool: SocketConnectionPool
  /// Whether TLS can be had: OpenSSL 3 could be loaded.
  ///
  /// Where not, HTTPS goes through
  /// `URLSession`.
  var supportsTLS: Bool

  init(
    configuration: URLSessionConfiguration, enabled: Bool, trust: HTTPClient.ServerTrust = .system,
    clientCertificate: HTTPClient.ClientCertificate? = nil,
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) {
    tls = TLSContextCache(trust: trust, clientCertificate: clientCertificate)
    pool = SocketConnectionPool(maximumIdlePerHost: configuration.httpMaximumConnectionsPerHost)
    #if canImport(Glibc)
      supportsTLS = OpenSSL.loaded != nil
    #else
      supportsTLS = false
    #endif
    additionalHeaders = (configuration.httpAdditionalHeaders ?? [:]).compactMap { name, value in
      guard let name = name as? String else { return nil }
      return (name, "\(value)")
    }
    cookieStorage = configuration.httpShouldSetCookies ? configuration.httpCookieStorage : nil
    acceptsCookies = configuration.httpCookieAcceptPolicy != .never
    isAvailable = enabled && Self.canServe(configuration)
    // The proxy variables in libcurl's order: the scheme's own, then `all_proxy`; `no_proxy`
    // exempts hosts from them. `http_proxy` only in lower case, as libcurl reads it:
    // `HTTP_PROXY` is what a CGI program gets from a request's `Proxy:` field ("httpoxy"), and
    // curl 7.88 ignores it (checked).
    func named(_ names: [String]) -> String? {
      names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
    }
    let httpValue = named(["http_proxy", "all_proxy", "ALL_PROXY"])
    let httpsValue = named(["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"])
    let exemptions = (environment["no_proxy"] ?? environment["NO_PROXY"] ?? "").split(separator: ",")
      .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
    proxyExemptions = exemptions
    func route(_ value: String?) -> Route {
      guard let value else { return .direct }
      return Proxy(environmentValue: value).map(Route.proxy) ?? .unsupported
    }
    httpRoute = route(httpValue)
    httpsRoute = route(httpsValue)
  }

  /// A proxy the socket transport speaks: an HTTP proxy (`http://`) or a SOCKS5 proxy
  /// (`socks5://`, `socks5h://`).
  ///
  /// Through an HTTP proxy, HTTP requests go to it with their absolute URL as the target and
  /// HTTPS goes through a `CONNECT` tunnel, TLS end to end with the server; Basic credentials go
  /// to it if its URL has them. Through a SOCKS5 proxy, both go through a tunnel it opens
  /// (`SOCKS5`), and the server sees the requests as if they came directly.
  struct Proxy: Sendable, Equatable {
    /// The proxy's host (an IPv6 address without brackets).
    let host: String
    let port: Int
    /// The value of `Proxy-Authorization`, from the URL's user and password, if it has them
    /// (an HTTP proxy's only).
    let authorization: String?
    /// For a SOCKS5 proxy, how it is asked; `nil` for an HTTP proxy.
    let socks: SOCKS?

    /// How a SOCKS5 proxy is asked for a tunnel.
    struct SOCKS: Sendable, Equatable {
      /// Whether the proxy resolves the server's name (`socks5h://`); with `socks5://` this
      /// process resolves it and sends the address, as libcurl does.
      let proxyResolves: Bool
      /// The user name and password of the proxy's URL (RFC 1929), if it has them.
      let credentials: Credentials?
    }

    /// A SOCKS5 user name and password.
    struct Credentials: Sendable, Equatable {
      let user: String
      let password: String
    }

    /// `host:port`, for messages.
    var name: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Reads a proxy variable's value as libcurl does, for the forms the transport speaks.
    ///
    /// `http://`, `socks5://` or `socks5h://`, then `[user:password@]host[:port][/]`, or
    /// `host[:port]` (no scheme is HTTP; the port defaults to 1080, libcurl's). `nil` for any
    /// other scheme (`https://`, `socks4://`), which leaves the request to `URLSession`.
    init?(environmentValue value: String) {
      let trimmed = value.trimmingCharacters(in: .whitespaces)
      let text = trimmed.contains("://") ? trimmed : "http://" + trimmed
      guard let components = URLComponents(string: text),
        let scheme = components.scheme?.lowercased(), ["http", "socks5", "socks5h"].contains(scheme),
        var host = components.host, !host.isEmpty, components.path.isEmpty || components.path == "/"
      else { return nil }
      if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
      self.host = host
      port = components.port ?? 1080
      // `user` and `password` are already percent-decoded (`percentEncodedUser` is not).
      let credentials = components.user.map { Credentials(user: $0, password: components.password ?? "") }
      if scheme == "http" {
        authorization = credentials.map {
          "Basic " + Data(($0.user + ":" + $0.password).utf8).base64EncodedString()
        }
        socks = nil
      } else {
        authorization = nil
        socks = SOCKS(proxyResolves: scheme == "socks5h", credentials: credentials)
      }
    }
  }

  /// How a request to `host` over `scheme` goes.
  enum Route: Sendable, Equatable {
    /// Straight to the server.
    case direct
    /// Through `Proxy`.
    case proxy(Proxy)
    /// Through a proxy only `URLSession` speaks (a scheme other than `http://`, `socks5://` and
    /// `socks5h://`).
    case unsupported
  }

  /// How a request to `host` over `scheme` ("http" or "https") goes: libcurl's choice of proxy
  /// from the environment, `no_proxy` applied.
  func route(scheme: String, host: String) -> Route {
    let named = scheme == "https" ? httpsRoute : httpRoute
    return named == .direct || Self.isExempt(host, proxyExemptions) ? .direct : named
  }

  /// Whether `no_proxy`'s `exemptions` cover `host`: it is `*`, names the host, or a domain the
  /// host is in (`example.com` and `.example.com` both cover `api.example.com`).
  private static func isExempt(_ host: String, _ exemptions: [String]) -> Bool {
    let host = host.lowercased()
    return exemptions.contains { entry in
      if entry == "*" { return true }
      let domain = entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
      return host == domain || host.hasSuffix("." + domain)
    }
  }

  /// Whether a session with `configuration` would reach a plain-HTTP server directly, without
  /// a proxy or a protocol class the socket transport would bypass.
  private static func canServe(_ configuration: URLSessionConfiguration) -> Bool {
    #if canImport(Glibc)
      if let proxies = configuration.connectionProxyDictionary, !proxies.isEmpty { return false }
      // Foundation's own protocol classes are named with a leading underscore
      // (`_HTTPURLProtocol`); any other was registered by the caller.
      let classes = configuration.protocolClasses ?? []
      return classes.allSatisfy { String(describing: $0).hasPrefix("_") }
    #else
      return false
    #endif
  }

  /// Whether the socket transport serves `request`.
  ///
  /// It serves plain HTTP, and HTTPS where OpenSSL 3 can be loaded, to a host, directly or
  /// through a proxy of the environment it speaks (`route(scheme:host:)`), with no credentials
  /// in the URL, no body other than `httpBody`, and header fields that are safe to write as they
  /// are. Anything else goes through `URLSession`.
  func serves(_ request: URLRequest) -> Bool {
    guard isAvailable, let url = request.url, let scheme = url.scheme?.lowercased(),
      scheme == "http" || (scheme == "https" && supportsTLS),
      let host = url.host, !host.isEmpty, url.user == nil, url.password == nil,
      request.httpBodyStream == nil, route(scheme: scheme, host: host) != .unsupported
    else { return false }
    let method = request.httpMethod ?? "GET"
    guard !method.isEmpty, method.utf8.allSatisfy(FieldSyntax.isTokenByte),
      !FieldSyntax.equalsIgnoringASCIICase(method, "CONNECT")
    else { return false }
    for (name, value) in request.allHTTPHeaderFields ?? [:] where !Self.isSafeField(name, value) {
      return false
    }
    return true
  }

  /// The error of an HTTPS request that the socket transport does not serve and `URLSession`
  /// must not carry, or `nil` when it may go through `URLSession`: a request to a pinned host
  /// (`URLSession` cannot check pins), or any HTTPS request of a client with a client
  /// certificate (`URLSession` cannot present it).
  func tlsRefusal(for request: URLRequest) -> URLError? {
    guard let url = request.url, url.scheme?.lowercased() == "https", let host = url.host else { return nil }
    let what: String
    if tls.trust.pins(for: host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host) != nil {
      what = "\(host) has public-key pins, which only the socket transport checks"
    } else if tls.clientCertificate != nil {
      what = "the client has a client certificate, which only the socket transport presents"
    } else {
      return nil
    }
    let why =
      !supportsTLS
      ? Self.tlsUnavailableReason
      : "the socket transport cannot serve this request (the urlSession engine, a proxy other than http:// or SOCKS5, credentials in the URL, or a body stream)"
    return URLError(
      .secureConnectionFailed,
      userInfo: [NSLocalizedDescriptionKey: "\(what), and \(why); the request was not sent"])
  }

  /// Why TLS cannot be had on the socket transport.
  private static var tlsUnavailableReason: String {
    #if canImport(Glibc)
      if case .failure(let error) = OpenSSL.shared { return error.localizedDescription }
      return "TLS is available"
    #else
      return "TLS on the socket transport needs Linux"
    #endif
  }

  /// Whether a field with `name` and `value` can be written into a request head as it is
  /// (`FieldSyntax`: a token for a name, no control byte but a tab in the value).
  static func isSafeField(_ name: String, _ value: String) -> Bool {
    FieldSyntax.isValidField(name, value)
  }
}
