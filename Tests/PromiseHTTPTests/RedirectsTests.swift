import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

@Suite("Redirects", .timeLimit(.minutes(1)))
struct RedirectsTests {
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
      guard case .tooManyRedirects(_, let url)? = httpError(result) else { return }
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
        of: server.client(maximumRedirects: 3).get("hop", query: [.init(name: "n", value: "0")]))
      report("endless redirect chain, limit 3", result, elapsed)
      guard case .tooManyRedirects(let limit, _)? = httpError(result) else { return }
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
        let client = HTTPClient(baseURL: other.baseURL, retryPolicy: .none)
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

  @Test func aRedirectToAnotherSchemeIsRefused() async throws {
    try await withServer({ router in
      router.on("GET", "/file") { _ in .respond(.redirect(to: "file:///etc/passwd")) }
    }) { server in
      let (result, _) = await outcome(of: server.client().get("file"))
      guard case .invalidRequest? = httpError(result) else { return }
    }
  }

  @Test func anAbsoluteURLElsewhereGetsNoDefaultCredentialsOrToken() async throws {
    try await withServer({ router in
      router.on("GET", "/ok") { _ in .respond(.text("ok")) }
      router.on("POST", "/token") { _ in .respond(.json("{\"value\":\"t\"}")) }
    }) { server in
      let tokens = server.client()
      let authenticator = TokenAuthenticator { tokens.post("token", body: []).text() }
      let client = HTTPClient(
        baseURL: server.baseURL, defaultHeaders: ["Authorization": "Bearer s3cret", "X-App": "story"],
        retryPolicy: .none)
      let elsewhere = server.server.secondBaseURL.appendingPathComponent("ok").absoluteString
      _ = try await client.get(elsewhere).value
      let authenticated = HTTPClient(
        baseURL: server.baseURL, retryPolicy: .none, authenticator: authenticator)
      _ = try await authenticated.get(elsewhere).value
      let arrived = server.requests.filter { $0.host == "127.0.0.2" }
      #expect(arrived.count == 2)
      #expect(arrived.allSatisfy { $0.header("Authorization") == nil })
      #expect(arrived.first?.header("X-App") == "story")
    }
  }
}
