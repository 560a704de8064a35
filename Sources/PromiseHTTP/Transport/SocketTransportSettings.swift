import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What the socket transport needs of a client's session configuration, read once.
struct SocketTransportSettings: Sendable {
  /// Whether the socket transport may serve a client's transfers at all: no proxy in the
  /// session's configuration, no protocol class of the caller's, and not turned off.
  var isAvailable: Bool
  /// `URLSessionConfiguration.httpAdditionalHeaders`, sent unless the request sets the field.
  var additionalHeaders: [(name: String, value: String)]
  /// Where cookies come from and go to, as FoundationNetworking would use them; `nil` for none.
  var cookieStorage: HTTPCookieStorage?
  /// Whether responses' cookies are stored (the storage's accept policy is not `.never`).
  var acceptsCookies: Bool
  /// The hosts libcurl reaches without the environment's proxy (`no_proxy`), when the
  /// environment names one; `nil` when it names none.
  var proxyExemptions: [String]?

  init(
    configuration: URLSessionConfiguration, enabled: Bool,
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) {
    additionalHeaders = (configuration.httpAdditionalHeaders ?? [:]).compactMap { name, value in
      guard let name = name as? String else { return nil }
      return (name, "\(value)")
    }
    cookieStorage = configuration.httpShouldSetCookies ? configuration.httpCookieStorage : nil
    acceptsCookies = configuration.httpCookieAcceptPolicy != .never
    isAvailable = enabled && Self.canServe(configuration)
    // libcurl honours these for plain HTTP; `no_proxy` exempts hosts from them.
    let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"].contains {
      environment[$0]?.isEmpty == false
    }
    proxyExemptions =
      proxied
      ? (environment["no_proxy"] ?? environment["NO_PROXY"] ?? "").split(separator: ",")
        .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
      : nil
  }

  /// Whether libcurl would reach `host` without the environment's proxy: no proxy is named, or
  /// `no_proxy` is `*`, names the host, or a domain the host is in (`example.com` and
  /// `.example.com` both cover `api.example.com`).
  func bypassesProxy(_ host: String) -> Bool {
    guard let exemptions = proxyExemptions else { return true }
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
  /// It serves plain HTTP to a host, with no credentials in the URL, no body other than
  /// `httpBody`, and header fields that are safe to write as they are. Anything else goes
  /// through `URLSession`.
  func serves(_ request: URLRequest) -> Bool {
    guard isAvailable, let url = request.url, url.scheme?.lowercased() == "http",
      let host = url.host, !host.isEmpty, bypassesProxy(host), url.user == nil, url.password == nil,
      request.httpBodyStream == nil
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

  /// Whether a field with `name` and `value` can be written into a request head as it is
  /// (`FieldSyntax`: a token for a name, no control byte but a tab in the value).
  static func isSafeField(_ name: String, _ value: String) -> Bool {
    FieldSyntax.isValidField(name, value)
  }
}
