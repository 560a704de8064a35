import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("Redirects", .timeLimit(.minutes(1)))
struct RedirectsTests {
  /// Where a cross-origin redirect leads: the same port on another address, or another port.
  enum Elsewhere: CaseIterable {
    case otherHost, otherPort
  }
  static let credentials = [
    "Authorization": "Bearer s3cret", "Cookie": "id=s3cret", "Proxy-Authorization": "Basic cHc=",
    "X-Trace": "t-1",
  ]

  @Test func aChainIsFollowedToTheFinalURL() async throws {
    try await withServer({ router in
      router.on("GET", "/a") { _ in .respond(.redirect(to: "/b", status: 301)) }
      router.on("GET", "/b") { _ in .respond(.redirect(to: "/c", status: 307)) }
      router.on("GET", "/c") { _ in .respond(.text("end")) }
    }) { server in
      let (result, elapsed) = await outcome(of: server.client().get("a"))
      report("redirect chain a → b → c", result, elapsed)
      let response = try result.get()
      #expect(response.text == "end")
      #expect(response.url.path == "/c")
      #expect(response.requestURL.path == "/a")
      #expect(server.requests.map(\.path) == ["/a", "/b", "/c"])
    }
  }

  @Test func aLoopIsStoppedAtTheFirstRepeat() async throws {
    try await withServer({ router in
      router.on("GET", "/ping") { _ in .respond(.redirect(to: "/pong")) }
      router.on("GET", "/pong") { _ in .respond(.redirect(to: "/ping")) }
    }) { server in
      let (result, elapsed) = await outcome(of: server.client().get("ping"))
      report("redirect loop ping ↔ pong", result, elapsed)
      guard case .tooManyRedirects(_, let url)? = httpError(result) else {
        Issue.record("expected tooManyRedirects, got \(result)")
        return
      }
      #expect(url?.path == "/ping")
      #expect(server.requests.count == 2)
    }
  }

  @Test func theLimitIsEnforced() async throws {
    try await withServer({ router in
      router.on("GET", "/hop") { request in
        let next = Int(request.query?.dropFirst(2) ?? "0") ?? 0
        return .respond(.redirect(to: "/hop?n=\(next + 1)"))
      }
    }) { server in
      let (result, elapsed) = await outcome(
        of: server.client(redirectPolicy: .follow(maximum: 3)).get(
          "hop", query: [.init(name: "n", value: "0")]))
      report("endless redirect chain, limit 3", result, elapsed)
      guard case .tooManyRedirects(let limit, _)? = httpError(result) else {
        Issue.record("expected tooManyRedirects, got \(result)")
        return
      }
      #expect(limit == 3)
      #expect(server.requests.count == 4)
    }
  }

  @Test func credentialsDoNotFollowACrossOriginRedirect() async throws {
    try await withServer({ router in
      router.on("GET", "/ok") { _ in .respond(.text("ok")) }
    }) { server in
      let other = server.server.secondBaseURL.appendingPathComponent("ok").absoluteString
      server.router.on("GET", "/away") { _ in .respond(.redirect(to: other)) }
      let (result, elapsed) = await outcome(of: server.client().get("away", headers: Self.credentials))
      report("cross-origin redirect 127.0.0.1 → 127.0.0.2 with credentials", result, elapsed)
      #expect(try result.get().url.host == "127.0.0.2")
      let arrived = try #require(server.requests.last)
      #expect(arrived.host == "127.0.0.2")
      #expect(arrived.header("Authorization") == nil)
      #expect(arrived.header("Cookie") == nil)
      #expect(arrived.header("Proxy-Authorization") == nil)
      #expect(arrived.header("X-Trace") == "t-1")
    }
  }

  @Test func credentialsDoNotFollowARedirectToAnotherPort() async throws {
    try await withServer({ router in
      router.on("GET", "/ok") { _ in .respond(.text("ok")) }
    }) { origin in
      try await withServer({ _ in }) { other in
        let target = origin.baseURL.appendingPathComponent("ok").absoluteString
        other.router.on("GET", "/away") { _ in .respond(.redirect(to: target)) }
        let client = HTTPClient(baseURL: other.baseURL, configuration: .init(retryPolicy: .none))
        _ = try await client.get("away", headers: Self.credentials).value
        #expect(origin.requests.last?.header("Authorization") == nil)
      }
    }
  }

  @Test func credentialsFollowASameOriginRedirect() async throws {
    try await withServer({ router in
      router.on("GET", "/old") { _ in .respond(.redirect(to: "/new", status: 308)) }
      router.on("GET", "/new") { _ in .respond(.text("ok")) }
    }) { server in
      _ = try await server.client().get("old", headers: ["Authorization": "Bearer s3cret"]).value
      #expect(server.requests.last?.header("Authorization") == "Bearer s3cret")
    }
  }

  /// FoundationNetworking turns these into a same-origin `http` URL (`/etc/passwd`, `/,hello`,
  /// `/alert(1)`) and proposes to follow it; the client must refuse before a second request.
  @Test(
    "a redirect to a scheme other than http or https is refused before anything else is sent",
    arguments: [
      "file:///etc/passwd", "data:,hello", "javascript:alert(1)", "FILE:///etc/passwd", "ftp://127.0.0.1/x",
    ])
  func aRedirectToAnotherSchemeIsRefused(location: String) async throws {
    try await withServer({ router in
      router.on("GET", "/away") { _ in .respond(.redirect(to: location)) }
    }) { server in
      let (result, elapsed) = await outcome(of: server.client(retryPolicy: quickRetries()).get("away"))
      report("redirect to \(location)", result, elapsed)
      guard case .invalidRequest(let text)? = httpError(result) else {
        Issue.record("expected invalidRequest, got \(result)")
        return
      }
      #expect(text.contains("unsupported scheme") && text.contains("was not followed"), "\(text)")
      // The first request was sent: the description must not say that nothing was.
      #expect(httpError(result)?.description.contains("nothing was sent") == false)
      #expect(server.requests.map(\.path) == ["/away"])
    }
  }

  @Test(
    "a redirect status without a usable Location is reported as that status, not retried",
    arguments: [(301, nil), (302, ""), (303, "http://[bad"), (307, nil), (308, nil)] as [(Int, String?)])
  func aRedirectWithoutLocationIsItsStatus(status: Int, location: String?) async throws {
    try await withServer({ router in
      router.on("GET", "/moved") { _ in
        .respond(
          ServerResponse(
            status: status, headers: location.map { [("Location", $0)] } ?? [], body: Array("gone".utf8)))
      }
    }) { server in
      let (result, elapsed) = await outcome(of: server.client(retryPolicy: quickRetries()).get("moved"))
      report("\(status) with Location \(location.map { "'\($0)'" } ?? "missing")", result, elapsed)
      guard case .unacceptableStatus(let code, let headers, _, let url)? = httpError(result) else {
        Issue.record("expected unacceptableStatus, got \(result)")
        return
      }
      #expect(code == status)
      #expect(headers["Location"] == location)
      #expect(url.path == "/moved")
      #expect(server.requests.count == 1)
    }
  }

  @Test func anAPIKeyDoesNotFollowACrossOriginRedirect() async throws {
    try await withServer({ router in
      router.on("GET", "/ok") { _ in .respond(.text("ok")) }
    }) { server in
      let other = server.server.secondBaseURL.appendingPathComponent("ok").absoluteString
      server.router.on("GET", "/away") { _ in .respond(.redirect(to: other)) }
      let client = server.client(defaultHeaders: ["x-api-key": "k-default"])
      _ = try await client.get("away", headers: ["X-API-Key": "k-s3cret", "X-Trace": "t-1"]).value
      let arrived = try #require(server.requests.last)
      #expect(arrived.host == "127.0.0.2")
      #expect(arrived.header("X-Api-Key") == nil)
      #expect(arrived.header("X-Trace") == "t-1")
    }
  }

  @Test func anAbsoluteURLElsewhereGetsNoDefaultCredentialsOrToken() async throws {
    try await withServer({ router in
      router.on("GET", "/ok") { _ in .respond(.text("ok")) }
      router.on("POST", "/token") { _ in .respond(.json("{\"value\":\"t\"}")) }
    }) { server in
      let tokens = server.client()
      let authenticator = TokenAuthenticator { tokens.post("token").text() }
      let client = HTTPClient(
        baseURL: server.baseURL,
        configuration: .init(
          defaultHeaders: ["Authorization": "Bearer s3cret", "X-App": "story"], retryPolicy: .none))
      let elsewhere = server.server.secondBaseURL.appendingPathComponent("ok").absoluteString
      _ = try await client.get(elsewhere).value
      let authenticated = HTTPClient(
        baseURL: server.baseURL, configuration: .init(retryPolicy: .none, authenticator: authenticator))
      _ = try await authenticated.get(elsewhere).value
      let arrived = server.requests.filter { $0.host == "127.0.0.2" }
      #expect(arrived.count == 2)
      #expect(arrived.allSatisfy { $0.header("Authorization") == nil })
      #expect(arrived.first?.header("X-App") == "story")
    }
  }

  @Test(
    "sensitive headers, the default ones and those a client adds, do not follow a redirect to another origin",
    arguments: Elsewhere.allCases)
  func sensitiveHeadersStayWithTheirOrigin(elsewhere: Elsewhere) async throws {
    try await withServer({ router in
      router.on("GET", "/ok") { _ in .respond(.text("ok")) }
    }) { origin in
      try await withServer({ router in
        router.on("GET", "/ok") { _ in .respond(.text("ok")) }
      }) { other in
        let target = elsewhere == .otherHost ? origin.server.secondBaseURL : other.baseURL
        let location = target.appendingPathComponent("ok").absoluteString
        origin.router.on("GET", "/away") { _ in .respond(.redirect(to: location)) }
        let client = origin.client(sensitiveHeaders: HTTPClient.defaultSensitiveHeaders.union(["x-session"]))
        let headers = ["X-Api-Key": "k-s3cret", "X-SESSION": "s-s3cret", "Cookie": "c", "X-Trace": "t-1"]
        let response = try await client.get("away", headers: headers).value
        #expect(response.url.absoluteString == location)
        let arrived = (origin.requests + other.requests).filter { $0.pathWithoutQuery == "/ok" }
        #expect(arrived.count == 1)
        #expect(arrived.first?.header("X-Api-Key") == nil)
        #expect(arrived.first?.header("X-Session") == nil)
        #expect(arrived.first?.header("Cookie") == nil)
        #expect(arrived.first?.header("X-Trace") == "t-1")
      }
    }
  }

  @Test func aSensitiveHeaderFollowsASameOriginRedirect() async throws {
    try await withServer({ router in
      router.on("GET", "/old") { _ in .respond(.redirect(to: "/new", status: 307)) }
      router.on("GET", "/new") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client(sensitiveHeaders: ["X-Session"])
      _ = try await client.get("old", headers: ["x-session": "s-1", "X-Api-Key": "k-1"]).value
      #expect(server.requests.last?.header("X-Session") == "s-1")
      #expect(server.requests.last?.header("X-Api-Key") == "k-1")
    }
  }

  @Test func theContractCredentialsStaySensitiveWhateverTheClientIsGiven() async throws {
    try await withServer({ router in
      router.on("GET", "/ok") { _ in .respond(.text("ok")) }
    }) { server in
      let other = server.server.secondBaseURL.appendingPathComponent("ok").absoluteString
      server.router.on("GET", "/away") { _ in .respond(.redirect(to: other)) }
      let client = server.client(sensitiveHeaders: ["cookie"])
      #expect(client.sensitiveHeaders == ["cookie", "Authorization", "Proxy-Authorization"])
      _ = try await client.get("away", headers: Self.credentials.merging(["X-Api-Key": "k"]) { $1 }).value
      let arrived = try #require(server.requests.last)
      #expect(arrived.host == "127.0.0.2")
      #expect(arrived.header("Authorization") == nil)
      #expect(arrived.header("Proxy-Authorization") == nil)
      #expect(arrived.header("Cookie") == nil)
      #expect(arrived.header("X-Api-Key") == "k", "not sensitive for this client, so it follows")
    }
  }

  @Test func theSchemeOfALocationIsReadAsRFC3986Says() {
    let cases: [(String, String?)] = [
      ("file:///etc/passwd", "file"), ("data:,hello", "data"), ("HTTPS://example.com/", "https"),
      (" javascript:alert(1)", "javascript"), ("c+d.e-f:x", "c+d.e-f"), ("/a:b", nil), ("a/b:c", nil),
      ("//host/x", nil), ("?q=a:b", nil), ("#a:b", nil), ("1abc:x", nil), ("", nil), ("relative", nil),
    ]
    for (reference, scheme) in cases {
      #expect(Redirects.scheme(ofReference: reference) == scheme, "\(reference)")
    }
  }

  @Test func aHopIsDecidedByTheRawLocationNotByWhatFoundationNetworkingProposes() throws {
    let origin = try #require(URL(string: "http://127.0.0.1:8080/r"))
    // What FoundationNetworking proposes for `Location: file:///etc/passwd`.
    var proposed = URLRequest(url: try #require(URL(string: "http://127.0.0.1:8080/etc/passwd")))
    proposed.setValue("k", forHTTPHeaderField: "X-Api-Key")
    let names = HeaderNameSet(sensitive: HTTPClient.defaultSensitiveHeaders)
    let refused = Redirects.decide(
      location: "file:///etc/passwd", status: 302, from: origin, proposed: proposed, original: proposed,
      origin: origin,
      visited: [origin], policy: .default,
      sensitiveHeaders: names)
    #expect(refused == .unsupportedScheme("file"))
    let delivered = Redirects.decide(
      location: "file:///etc/passwd", status: 302, from: origin, proposed: proposed, original: proposed,
      origin: origin,
      visited: [origin],
      policy: .doNotFollow, sensitiveHeaders: names)
    #expect(delivered == .deliver)
    proposed.url = URL(string: "http://127.0.0.2:8080/x")
    guard
      case .follow(let next) = Redirects.decide(
        location: "http://127.0.0.2:8080/x", status: 302, from: origin, proposed: proposed,
        original: proposed,
        origin: origin,
        visited: [origin],
        policy: .default, sensitiveHeaders: names)
    else {
      Issue.record("expected the hop to be followed")
      return
    }
    #expect(next.value(forHTTPHeaderField: "X-Api-Key") == nil)
  }

  @Test(
    "a relative Location is resolved against the URL that answered (RFC 3986 §5.2)",
    arguments: [
      ("?x=1", "http://h:1/redirect-to?x=1"), ("next", "http://h:1/next"), ("../up", "http://h:1/up"),
      ("/abs?q", "http://h:1/abs?q"), ("//other:2/p", "http://other:2/p"),
      ("#frag", "http://h:1/redirect-to?url=a#frag"),
      (" /padded", "http://h:1/padded"), ("https://x/y", "https://x/y"),
    ])
  func aRelativeLocationIsResolvedAgainstTheCurrentURL(location: String, expected: String) throws {
    let current = try #require(URL(string: "http://h:1/redirect-to?url=a"))
    #expect(Redirects.resolve(location, against: current)?.absoluteString == expected)
  }

  @Test func aLocationThatIsOnlyAQueryKeepsThePathOfTheURLThatAnswered() async throws {
    try await withServer({ router in
      router.on("GET", "/redirect-to") { request in
        request.query == "x=1"
          ? .respond(.text("query \(request.query ?? "")")) : .respond(.redirect(to: "?x=1"))
      }
    }) { server in
      let response = try await server.client().get(
        "redirect-to", query: [URLQueryItem(name: "url", value: "elsewhere")]
      ).value
      #expect(response.text == "query x=1")
      #expect(response.url.path == "/redirect-to")
      #expect(server.requests.map(\.path) == ["/redirect-to?url=elsewhere", "/redirect-to?x=1"])
    }
  }

  @Test func sensitiveHeadersOfTheSessionConfigurationStayWithTheirOrigin() async throws {
    try await withServer({ router in
      router.on("GET", "/ok") { _ in .respond(.text("ok")) }
    }) { server in
      let other = server.server.secondBaseURL.appendingPathComponent("ok").absoluteString
      server.router.on("GET", "/away") { _ in .respond(.redirect(to: other)) }
      let configuration = HTTPClient.makeDefaultConfiguration()
      configuration.httpAdditionalHeaders = [
        "Authorization": "Bearer s3cret", "x-api-key": "k-s3cret", "X-App": "story",
      ]
      let client = HTTPClient(
        baseURL: server.baseURL, configuration: .init(sessionConfiguration: configuration, retryPolicy: .none)
      )
      _ = try await client.get("away").value
      _ = try await client.get(other).value
      let home = try #require(server.requests.first)
      #expect(home.header("Authorization") == "Bearer s3cret")
      #expect(home.header("X-Api-Key") == "k-s3cret")
      let elsewhere = server.requests.filter { $0.host == "127.0.0.2" }
      #expect(elsewhere.count == 2)
      for request in elsewhere {
        #expect(request.header("Authorization") == nil)
        #expect(request.header("X-Api-Key") == nil)
        #expect(request.header("X-App") == "story")
      }
    }
  }
}
