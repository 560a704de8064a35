import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A protocol class of the caller's: a session that has one must not be bypassed.
private final class InterceptingProtocol: URLProtocol {
  override class func canInit(with request: URLRequest) -> Bool { false }
  override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
  override func startLoading() {}
  override func stopLoading() {}
}

/// A request for `url` with exactly these header fields.
///
/// Set as `allHTTPHeaderFields`: `setValue(_:forHTTPHeaderField:)` drops a value with CR, LF or
/// NUL, but the whole dictionary is kept as given (an interceptor's request may hold anything).
private func makeRequest(_ url: String, method: String = "GET", headers: [String: String] = [:]) -> URLRequest
{
  var request = URLRequest(url: URL(string: url)!)
  request.httpMethod = method
  request.allHTTPHeaderFields = headers
  return request
}

/// Which client sessions and requests the socket transport serves (`SocketTransportSettings`).
@Suite("SocketTransportSettings")
struct SocketTransportSettingsTests {
  static func settings(
    transport: HTTPClient.Engine = .automatic,
    _ configure: (URLSessionConfiguration) -> Void = { _ in }
  ) -> SocketTransportSettings {
    let configuration = HTTPClient.makeDefaultConfiguration()
    configure(configuration)
    return SocketTransportSettings(
      configuration: configuration, enabled: transport == .automatic, environment: [:])
  }

  @Test func theEnvironmentsHTTPProxyIsTakenAndNoProxyExemptsHosts() {
    func settings(_ environment: [String: String]) -> SocketTransportSettings {
      SocketTransportSettings(
        configuration: HTTPClient.makeDefaultConfiguration(), enabled: true, environment: environment)
    }
    let proxy = SocketTransportSettings.Proxy(environmentValue: "http://proxy.example:3128")
    let exempting = settings([
      "http_proxy": "http://proxy.example:3128", "no_proxy": "localhost, .internal.example,127.0.0.1",
    ])
    #expect(exempting.route(scheme: "http", host: "127.0.0.1") == .direct)
    #expect(exempting.route(scheme: "http", host: "LOCALHOST") == .direct)
    #expect(exempting.route(scheme: "http", host: "api.internal.example") == .direct)
    #expect(exempting.route(scheme: "http", host: "internal.example") == .direct)
    #expect(exempting.route(scheme: "http", host: "example.com") == proxy.map { .proxy($0) })
    #expect(exempting.route(scheme: "http", host: "notinternal.example") == proxy.map { .proxy($0) })
    #expect(exempting.route(scheme: "http", host: "127.0.0.10") == proxy.map { .proxy($0) })
    #expect(exempting.route(scheme: "https", host: "example.com") == .direct, "http_proxy is for HTTP only")
    // Served either way: directly, or through the proxy the socket transport speaks.
    #expect(exempting.serves(makeRequest("http://example.com/file")))
    #expect(exempting.serves(makeRequest("http://127.0.0.1:8080/file")))
    // A proxy only URLSession speaks leaves the request to it, unless no_proxy exempts the host.
    let socks4 = settings(["ALL_PROXY": "socks4://proxy.example", "NO_PROXY": "exempt.example"])
    #expect(!socks4.serves(makeRequest("http://a.b/f")))
    #expect(socks4.serves(makeRequest("http://exempt.example/f")))
    #expect(
      settings(["ALL_PROXY": "socks4://proxy.example", "NO_PROXY": "*"]).serves(makeRequest("http://a.b/f")))
    // A SOCKS5 proxy the socket transport speaks.
    #expect(settings(["ALL_PROXY": "socks5://proxy.example"]).serves(makeRequest("http://a.b/f")))
    #expect(!settings(["http_proxy": "https://proxy.example"]).serves(makeRequest("http://127.0.0.1/file")))
    #expect(settings(["all_proxy": "http://proxy.example"]).route(scheme: "http", host: "a.b") != .direct)
    // An empty variable names no proxy.
    #expect(settings(["http_proxy": ""]).route(scheme: "http", host: "127.0.0.1") == .direct)
    // Upper-case HTTP_PROXY is ignored, as libcurl ignores it ("httpoxy": a CGI program gets a
    // request's `Proxy:` field under that name); HTTPS_PROXY is read.
    #expect(settings(["HTTP_PROXY": "http://proxy.example"]).route(scheme: "http", host: "a.b") == .direct)
    #expect(settings(["HTTPS_PROXY": "http://proxy.example"]).route(scheme: "https", host: "a.b") != .direct)
  }

  @Test func aProxyVariableIsReadAsLibcurlReadsIt() throws {
    typealias Proxy = SocketTransportSettings.Proxy
    let full = try #require(Proxy(environmentValue: "http://ada:s%40cret@proxy.example:3128/"))
    #expect(full.host == "proxy.example" && full.port == 3128)
    #expect(full.authorization == "Basic " + Data("ada:s@cret".utf8).base64EncodedString())
    let bare = try #require(Proxy(environmentValue: "proxy.example"))
    #expect(bare.port == 1080 && bare.authorization == nil, "libcurl's default proxy port")
    #expect(try #require(Proxy(environmentValue: " 10.0.0.1:8080 ")).name == "10.0.0.1:8080")
    #expect(try #require(Proxy(environmentValue: "http://[::1]:3128")).name == "[::1]:3128")
    for unsupported in ["https://proxy.example", "socks4://proxy.example", "socks://p:1", "http://p/path"] {
      #expect(Proxy(environmentValue: unsupported) == nil, "\(unsupported)")
    }
    // SOCKS5: the proxy resolves the name with socks5h://, this process with socks5://; the
    // URL's credentials are the proxy's user name and password, never a Proxy-Authorization.
    let socks = try #require(Proxy(environmentValue: "socks5h://ada:s%40cret@127.0.0.1:1081"))
    #expect(socks.host == "127.0.0.1" && socks.port == 1081 && socks.authorization == nil)
    #expect(
      socks.socks
        == Proxy.SOCKS(proxyResolves: true, credentials: Proxy.Credentials(user: "ada", password: "s@cret")))
    let local = try #require(Proxy(environmentValue: "SOCKS5://proxy.example"))
    #expect(local.port == 1080 && local.socks == Proxy.SOCKS(proxyResolves: false, credentials: nil))
    #expect(full.socks == nil)
  }

  @Test(
    .enabled(if: socketTransportServesLoopback, "a proxy in the environment turns the socket transport off"))
  func aPlainHTTPGetIsServed() {
    let settings = Self.settings()
    #expect(settings.isAvailable)
    #expect(settings.serves(makeRequest("http://127.0.0.1:8080/file?a=1")))
    #expect(settings.serves(makeRequest("HTTP://example.com/file")))
    #expect(settings.serves(makeRequest("http://[::1]:8080/file", headers: ["Accept": "*/*", "X-A": ""])))
    #expect(settings.serves(makeRequest("http://127.0.0.1/file", method: "POST")))
  }

  @Test func httpsIsServedWhereOpenSSLLoadsThroughAnHTTPProxyToo() {
    func make(_ environment: [String: String]) -> SocketTransportSettings {
      SocketTransportSettings(
        configuration: HTTPClient.makeDefaultConfiguration(), enabled: true, environment: environment)
    }
    var settings = make([:])
    settings.isAvailable = true
    settings.supportsTLS = true
    #expect(settings.serves(makeRequest("https://127.0.0.1:8443/file")))
    #expect(settings.serves(makeRequest("HTTPS://example.com/file")))
    var https = make(["https_proxy": "http://proxy.example", "no_proxy": "exempt.example"])
    https.isAvailable = true
    https.supportsTLS = true
    #expect(https.serves(makeRequest("https://a.example/file")), "through a CONNECT tunnel")
    #expect(https.route(scheme: "https", host: "a.example") != .direct)
    #expect(https.route(scheme: "https", host: "exempt.example") == .direct)
    #expect(https.route(scheme: "http", host: "a.example") == .direct, "https_proxy is for HTTPS only")
    var socks = make(["https_proxy": "socks5h://proxy.example"])
    socks.isAvailable = true
    socks.supportsTLS = true
    #expect(socks.serves(makeRequest("https://a.example/file")), "through a SOCKS5 tunnel")
    var socks4 = make(["https_proxy": "socks4://proxy.example"])
    socks4.isAvailable = true
    socks4.supportsTLS = true
    #expect(!socks4.serves(makeRequest("https://a.example/file")), "a proxy only URLSession speaks")
    settings.supportsTLS = false
    #expect(!settings.serves(makeRequest("https://127.0.0.1:8443/file")), "no OpenSSL 3: URLSession")
  }

  @Test(arguments: [
    ("ftp", makeRequest("ftp://127.0.0.1/file")),
    ("no host", makeRequest("http:///file")),
    ("user and password", makeRequest("http://user:secret@127.0.0.1:8080/file")),
    ("user", makeRequest("http://user@127.0.0.1:8080/file")),
    ("CR LF in a value", makeRequest("http://127.0.0.1/file", headers: ["X-Test": "a\r\nInjected: 1"])),
    ("LF in a value", makeRequest("http://127.0.0.1/file", headers: ["X-Test": "a\nInjected: 1"])),
    ("CR in a value", makeRequest("http://127.0.0.1/file", headers: ["X-Test": "a\rb"])),
    ("NUL in a value", makeRequest("http://127.0.0.1/file", headers: ["X-Test": "a\u{0}b"])),
    ("space in a name", makeRequest("http://127.0.0.1/file", headers: ["X Test": "a"])),
    ("colon in a name", makeRequest("http://127.0.0.1/file", headers: ["X:Test": "a"])),
    ("CONNECT", makeRequest("http://127.0.0.1/file", method: "CONNECT")),
    ("space in the method", makeRequest("http://127.0.0.1/file", method: "G ET")),
  ])
  func aRequestTheSocketTransportCannotWriteSafelyIsLeftToURLSession(_ what: String, _ request: URLRequest) {
    // Whatever the environment: the request alone decides, on settings that are available.
    var settings = Self.settings()
    settings.isAvailable = true
    #expect(!settings.serves(request), "\(what)")
  }

  @Test func aBodyStreamIsLeftToURLSession() {
    var settings = Self.settings()
    settings.isAvailable = true
    var request = makeRequest("http://127.0.0.1/file", method: "PUT")
    request.httpBodyStream = InputStream(data: Data("body".utf8))
    #expect(!settings.serves(request))
  }

  @Test func aSessionWithAProxyOrAProtocolClassOfItsOwnOrURLSessionChosenIsNotServed() {
    let plain = makeRequest("http://127.0.0.1:8080/file")
    let proxied = Self.settings { configuration in
      configuration.connectionProxyDictionary = [
        "HTTPEnable": 1, "HTTPProxy": "127.0.0.1", "HTTPPort": 9,
      ]
    }
    #expect(!proxied.isAvailable && !proxied.serves(plain))
    let intercepted = Self.settings { configuration in
      configuration.protocolClasses = [InterceptingProtocol.self] + (configuration.protocolClasses ?? [])
    }
    #expect(!intercepted.isAvailable && !intercepted.serves(plain))
    let chosen = Self.settings(transport: .urlSession)
    #expect(!chosen.isAvailable && !chosen.serves(plain))
    // Foundation's own protocol classes are no reason to step aside.
    let foundations = Self.settings { configuration in
      configuration.protocolClasses = URLSessionConfiguration.ephemeral.protocolClasses
    }
    #expect(foundations.isAvailable == socketTransportServesLoopback)
  }

  @Test func theSessionsHeadersAndCookieSettingsAreRead() {
    let storage = URLSessionConfiguration.ephemeral.httpCookieStorage!
    let settings = Self.settings { configuration in
      configuration.httpAdditionalHeaders = ["X-Session": "yes", "X-Number": 7]
      configuration.httpCookieStorage = storage
      configuration.httpShouldSetCookies = true
      configuration.httpCookieAcceptPolicy = .always
    }
    #expect(settings.cookieStorage === storage)
    #expect(settings.acceptsCookies)
    let headers = Dictionary(uniqueKeysWithValues: settings.additionalHeaders.map { ($0.name, $0.value) })
    #expect(headers == ["X-Session": "yes", "X-Number": "7"])
    // The client's default: no cookies either way.
    let none = Self.settings()
    #expect(none.cookieStorage == nil && !none.acceptsCookies)
  }
}

/// Downloads over the socket transport, to the loopback server: the framings, interim
/// responses, redirects, cookies, the session's headers, and every fault's error.
@Suite(
  "Socket transport", .timeLimit(.minutes(1)),
  .enabled(if: socketTransportServesLoopback, "a proxy in the environment turns the socket transport off"))
struct SocketTransportTests {
  static let content = downloadContent(300 << 10, seed: 11)

  /// `text` as bytes, then `body`.
  static func raw(_ text: String, _ body: [UInt8] = []) -> ServerAction {
    .raw(Array(text.utf8) + body)
  }

  /// The `URLError` code of a transport failure, recording an issue for any other outcome.
  static func transportCode<T>(
    _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
  ) -> URLError.Code? {
    guard case .transport(let error, _)? = httpError(result, sourceLocation: sourceLocation) else {
      Issue.record("not a transport failure: \(result)", sourceLocation: sourceLocation)
      return nil
    }
    return error.code
  }

  /// Downloads from a server that answers with `action`, over the socket transport, and checks
  /// that the download fails with `code` and leaves no file; `what` names the case.
  func expectDownload(
    from action: ServerAction, failsWith code: URLError.Code, _ what: String = "",
    sourceLocation: SourceLocation = #_sourceLocation
  ) async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in action }
      }) { server in
        let (result, _) = await outcome(
          of: server.client(engine: .automatic).download("file", to: directory.file()))
        #expect(
          Self.transportCode(result, sourceLocation: sourceLocation) == code, "\(what)",
          sourceLocation: sourceLocation)
        #expect(directory.names.isEmpty, sourceLocation: sourceLocation)
        expectSent(over: .automatic, server.requests, sourceLocation: sourceLocation)
      }
    }
  }

  // MARK: Framings

  @Test func aChunkedBodyArrivesWhole() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in
          .chunked(ServerResponse(headers: [("ETag", "\"c1\"")], body: Self.content), chunkSize: 1000)
        }
      }) { server in
        let download = try await server.client(engine: .automatic).download("file", to: directory.file())
          .value
        #expect(download.byteCount == Int64(Self.content.count))
        #expect(download.response.headers["Transfer-Encoding"] == "chunked")
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(directory.names == ["download.bin"])
        expectSent(over: .automatic, server.requests)
      }
    }
  }

  @Test func aBodyDelimitedByTheConnectionClosingArrivesWhole() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in
          Self.raw(
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/octet-stream\r\n\r\n",
            Self.content)
        }
      }) { server in
        let download = try await server.client(engine: .automatic).download("file", to: directory.file())
          .value
        #expect(download.byteCount == Int64(Self.content.count))
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        expectSent(over: .automatic, server.requests)
      }
    }
  }

  @Test func interimResponsesBeforeTheFinalOneAreSkipped() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in
          Self.raw(
            "HTTP/1.1 100 Continue\r\n\r\n"
              + "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
              + "HTTP/1.1 200 OK\r\nX-Final: yes\r\nContent-Length: \(Self.content.count)\r\n\r\n",
            Self.content)
        }
      }) { server in
        let download = try await server.client(engine: .automatic).download("file", to: directory.file())
          .value
        #expect(download.response.statusCode == 200)
        #expect(download.response.headers["X-Final"] == "yes")
        #expect(download.response.headers["Link"] == nil)
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        expectSent(over: .automatic, server.requests)
      }
    }
  }

  @Test func interimResponsesWithoutEndAreRefused() async throws {
    // Past the limit of 16, with a final response after them that is never read.
    let interims =
      String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 17)
      + "HTTP/1.1 200 OK\r\nContent-Length: \(Self.content.count)\r\n\r\n"
    try await expectDownload(from: Self.raw(interims, Self.content), failsWith: .cannotParseResponse)
  }

  @Test func aSwitchOfProtocolsIsRefused() async throws {
    try await expectDownload(
      from: Self.raw("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"),
      failsWith: .cannotParseResponse)
  }

  // MARK: Redirects

  @Test(arguments: [302, 303, 307])
  func aRedirectToTheSameOriginIsFollowedOverTheSocketTransport(_ status: Int) async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/old") { _ in .respond(.redirect(to: "/file?v=2", status: status)) }
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        let download = try await server.client(engine: .automatic).download(
          "old", to: directory.file(), headers: ["Authorization": "Bearer same-origin"]
        ).value
        #expect(download.response.statusCode == 200)
        #expect(download.response.url.path == "/file")
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        let requests = server.requests
        #expect(requests.map(\.path) == ["/old", "/file?v=2"])
        #expect(requests.map(\.method) == ["GET", "GET"])
        #expect(requests.last?.header("Authorization") == "Bearer same-origin")
        expectSent(over: .automatic, requests)
      }
    }
  }

  @Test func aRedirectToAnotherOriginDropsTheCredentials() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        let elsewhere = server.server.secondBaseURL.appendingPathComponent("file").absoluteString
        server.router.on("GET", "/old") { _ in .respond(.redirect(to: elsewhere)) }
        let download = try await server.client(engine: .automatic).download(
          "old", to: directory.file(),
          headers: ["Authorization": "Bearer secret", "Cookie": "id=secret", "X-Trace": "t1"]
        ).value
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(download.response.url.host == "127.0.0.2")
        let requests = server.requests
        try #require(requests.count == 2)
        #expect(requests[0].host == "127.0.0.1" && requests[1].host == "127.0.0.2")
        #expect(requests[0].header("Authorization") == "Bearer secret")
        #expect(requests[1].header("Authorization") == nil)
        #expect(requests[1].header("Cookie") == nil)
        #expect(requests[1].header("X-Trace") == "t1")
        expectSent(over: .automatic, requests)
      }
    }
  }

  // MARK: Statuses, cookies, headers

  @Test func aNotFoundRejectsWithItsBodyExcerptAndLeavesNoFile() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(.text("no such file on this server", status: 404)) }
      }) { server in
        let (result, _) = await outcome(
          of: server.client(engine: .automatic).download("file", to: directory.file()))
        guard case .unacceptableStatus(404, let headers, let excerpt, let url)? = httpError(result) else {
          Issue.record("got \(result)")
          return
        }
        #expect(excerpt.contains("no such file on this server"))
        #expect(headers["Content-Type"] == "text/plain; charset=utf-8")
        #expect(url.path == "/file")
        #expect(directory.names.isEmpty)
        expectSent(over: .automatic, server.requests)
      }
    }
  }

  @Test func cookiesAreStoredInTheSessionsStorageAndSentOnTheNextDownload() async throws {
    let storage = URLSessionConfiguration.ephemeral.httpCookieStorage!
    let configuration = HTTPClient.makeDefaultConfiguration()
    configuration.httpCookieStorage = storage
    configuration.httpShouldSetCookies = true
    configuration.httpCookieAcceptPolicy = .always
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/login") { _ in
          .respond(
            ServerResponse(
              headers: [("Set-Cookie", "session=abc123; Path=/"), ("Set-Cookie", "theme=dark; Path=/")],
              body: Array("welcome".utf8)))
        }
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        let client = server.client(sessionConfiguration: configuration, engine: .automatic)
        _ = try await client.download("login", to: directory.file("login.txt")).value
        let stored = storage.cookies(for: server.baseURL) ?? []
        #expect(Set(stored.map { "\($0.name)=\($0.value)" }) == ["session=abc123", "theme=dark"])

        _ = try await client.download("file", to: directory.file()).value
        let cookie = try #require(server.requests.last?.header("Cookie"))
        let sent = Set(cookie.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) })
        #expect(sent == ["session=abc123", "theme=dark"])
        #expect(server.requests.first?.header("Cookie") == nil)
        expectSent(over: .automatic, server.requests)
      }
    }
  }

  @Test func theSessionsAdditionalHeadersAreSentUnlessTheRequestSetsThem() async throws {
    let configuration = HTTPClient.makeDefaultConfiguration()
    configuration.httpAdditionalHeaders = ["X-Session": "from-session", "X-Overridden": "session"]
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        let client = server.client(sessionConfiguration: configuration, engine: .automatic)
        _ = try await client.download("file", to: directory.file(), headers: ["x-overridden": "request"])
          .value
        let request = try #require(server.requests.first)
        #expect(request.header("X-Session") == "from-session")
        #expect(request.header("X-Overridden") == "request")
        #expect(request.headers.filter { $0.name.lowercased() == "x-overridden" }.count == 1)
        expectSent(over: .automatic, server.requests)
      }
    }
  }

  @Test func theUserAgentShowsWhichTransportCarriedADownload() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        _ = try await server.client(engine: .automatic).download("file", to: directory.file("a"))
          .value
        _ = try await server.client(engine: .urlSession).download("file", to: directory.file("b"))
          .value
        _ = try await server.client(engine: .automatic).download(
          "file", to: directory.file("c"), headers: ["User-Agent": "Mine/1.0"]
        ).value
        let agents = server.requests.map { $0.header("User-Agent") ?? "" }
        try #require(agents.count == 3)
        // The socket transport names itself; FoundationNetworking sends
        // "<process> (unknown version) curl/<version>" (HTTPURLProtocol's `userAgentString`).
        #expect(agents[0] == "PromiseHTTP")
        #expect(agents[1].contains("(unknown version) curl/"), "\(agents[1])")
        #expect(agents[2] == "Mine/1.0")
        #expect(directory.fingerprint("a") == Fingerprint(Self.content))
        #expect(directory.fingerprint("b") == Fingerprint(Self.content))
      }
    }
  }

  // MARK: Faults

  @Test func aRefusedConnectionIsCannotConnectToHost() async throws {
    try await withDownloadDirectory { directory in
      let closed = try ClosedPort()
      let client = HTTPClient(baseURL: closed.baseURL, configuration: .init(retryPolicy: .none))
      let (result, elapsed) = await outcome(of: client.download("file", to: directory.file()))
      #expect(Self.transportCode(result) == .cannotConnectToHost)
      // At once, not after the minute of the default timeout.
      #expect(elapsed < .seconds(30))
      #expect(directory.names.isEmpty)
    }
  }

  @Test(arguments: [
    ("a field without a colon", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nBroken field\r\n\r\nbody"),
    ("not HTTP", "SSH-2.0-OpenSSH_9.6\r\n\r\n"),
    ("a bad status", "HTTP/1.1 2xx OK\r\nContent-Length: 4\r\n\r\nbody"),
    ("conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nbody"),
    ("a head cut short", "HTTP/1.1 200 OK\r\nContent-Len"),
  ])
  func aMalformedHeadIsCannotParseResponse(_ what: String, _ response: String) async throws {
    try await expectDownload(from: Self.raw(response), failsWith: .cannotParseResponse, what)
  }

  @Test func anOverlongHeadIsCannotParseResponse() async throws {
    let field = "X-Padding: " + String(repeating: "p", count: 1000) + "\r\n"
    let head = "HTTP/1.1 200 OK\r\n" + String(repeating: field, count: 70) + "Content-Length: 4\r\n\r\nbody"
    try await expectDownload(from: Self.raw(head), failsWith: .cannotParseResponse)
  }

  @Test func anEmptyReplyIsNetworkConnectionLost() async throws {
    try await expectDownload(from: .closeImmediately, failsWith: .networkConnectionLost)
  }

  @Test(arguments: [
    ("bad hex", "chunked", "5\r\nhello\r\nzz\r\nworld\r\n0\r\n\r\n", URLError.Code.cannotParseResponse),
    ("no line break after the data", "chunked", "5\r\nhelloXX\r\n0\r\n\r\n", .cannotParseResponse),
    ("a negative size", "chunked", "5\r\nhello\r\n-5\r\nworld\r\n0\r\n\r\n", .cannotParseResponse),
    ("cut before the last chunk", "chunked", "5\r\nhello\r\n", .networkConnectionLost),
    ("a gzip transfer coding", "gzip, chunked", "5\r\nhello\r\n0\r\n\r\n", .cannotDecodeRawData),
  ])
  func aMalformedChunkedBodyFailsAndLeavesNoFile(
    _ what: String, _ coding: String, _ body: String, _ code: URLError.Code
  ) async throws {
    let response = "HTTP/1.1 200 OK\r\nTransfer-Encoding: \(coding)\r\n\r\n" + body
    try await expectDownload(from: Self.raw(response), failsWith: code, what)
  }

  @Test func aServerThatStallsMidBodyFailsByTheIdleTimeoutAndTheConnectionCloses() async throws {
    let queue = DispatchQueue(label: "SocketTransportTests.stall")
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        // Half the declared body, then nothing while the connection stays open.
        router.on("GET", "/file") { _ in
          .wrongContentLength(ServerResponse(body: Self.content), declared: Self.content.count * 2)
        }
      }) { server in
        let client = HTTPClient(
          baseURL: server.baseURL,
          configuration: .init(callbackQueue: queue, retryPolicy: .none, timeout: .milliseconds(300)))
        let start = ContinuousClock.now
        let (result, elapsed) = await outcome(of: client.download("file", to: directory.file()), since: start)
        guard case .timedOut(_, let allowed)? = httpError(result) else {
          Issue.record("got \(result)")
          return
        }
        #expect(allowed == .milliseconds(300))
        #expect(elapsed >= .milliseconds(300), "\(elapsed)")
        #expect(await eventually { server.server.openConnectionCount == 0 })
        await offThePool { queue.sync {} }
        #expect(directory.names.isEmpty)
        expectSent(over: .automatic, server.requests)
      }
    }
  }

}

/// The connection of the socket transport on its own: its idle timeout and its stop.
@Suite("SocketConnection", .timeLimit(.minutes(1)))
struct SocketConnectionTests {
  @Test func aReadThatWaitsPastTheIdleTimeoutIsTimedOut() async throws {
    try await withServer({ router in
      router.on("GET", "/silent") { _ in .slowHeaders(ServerResponse(), delay: .seconds(30)) }
    }) { server in
      let port = server.server.port
      let (code, elapsed) = await offThePool { () -> (URLError.Code?, Duration) in
        let start = ContinuousClock.now
        do {
          let connection = SocketConnection(idleTimeout: 0.2)
          try connection.connect(host: "127.0.0.1", port: port)
          try connection.send(contentsOf: Array("GET /silent HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
          var buffer = [UInt8](repeating: 0, count: 64)
          _ = try buffer.withUnsafeMutableBytes { try connection.receive(into: $0) }
          return (nil, ContinuousClock.now - start)
        } catch {
          return ((error as? URLError)?.code, ContinuousClock.now - start)
        }
      }
      #expect(code == .timedOut)
      // The idle timeout, not the server's 30 s.
      #expect(elapsed >= .milliseconds(200) && elapsed < .seconds(20), "\(elapsed)")
    }
  }

  @Test func aStoppedConnectionFailsEveryLaterCallWithCancelled() async throws {
    try await withServer({ router in
      router.on("GET", "/silent") { _ in .slowHeaders(ServerResponse(), delay: .seconds(30)) }
    }) { server in
      let port = server.server.port
      let codes = await offThePool { () -> [URLError.Code?] in
        do {
          let connection = SocketConnection(idleTimeout: 30)
          try connection.connect(host: "127.0.0.1", port: port)
          connection.stop()
          var codes: [URLError.Code?] = []
          do {
            try connection.send(contentsOf: Array("GET /silent HTTP/1.1\r\n\r\n".utf8))
            codes.append(nil)
          } catch {
            codes.append((error as? URLError)?.code)
          }
          var buffer = [UInt8](repeating: 0, count: 64)
          do {
            _ = try buffer.withUnsafeMutableBytes { try connection.receive(into: $0) }
            codes.append(nil)
          } catch {
            codes.append((error as? URLError)?.code)
          }
          return codes
        } catch {
          return [(error as? URLError)?.code]
        }
      }
      #expect(codes == [.cancelled, .cancelled])
    }
  }

  @Test func aRefusedConnectionIsCannotConnectToHost() async throws {
    let closed = try ClosedPort()
    let port = closed.port
    let code = await offThePool { () -> URLError.Code? in
      do {
        try SocketConnection(idleTimeout: 5).connect(host: "127.0.0.1", port: port)
        return nil
      } catch {
        return (error as? URLError)?.code
      }
    }
    #expect(code == .cannotConnectToHost)
  }
}
