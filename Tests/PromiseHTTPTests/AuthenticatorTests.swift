import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("Authenticator", .timeLimit(.minutes(1)))
struct AuthenticatorTests {
  /// Routes: `POST /token` issues `t1`, `t2`, …; `GET /data` accepts only the newest token.
  static func routes(_ router: Router, issued: Counter, tokenDelay: Duration = .zero) {
    router.on("POST", "/token") { _ in
      let number = issued.next()
      return .slowHeaders(.json("{\"value\":\"t\(number)\"}"), delay: tokenDelay)
    }
    router.on("GET", "/data") { request in
      request.header("Authorization") == "Bearer t\(issued.value)"
        ? .respond(.json("{\"ok\":true}")) : .respond(.text("expired", status: 401))
    }
  }

  struct Token: Decodable, Sendable {
    let value: String
  }

  static func authenticator(_ server: TestServer) -> TokenAuthenticator {
    let tokens = server.client()
    return TokenAuthenticator { tokens.post("token").decode(Token.self).map { $0.value } }
  }

  @Test func aTokenIsFetchedAndAttached() async throws {
    let issued = Counter()
    try await withServer({ Self.routes($0, issued: issued) }) { server in
      let client = server.client(authenticator: Self.authenticator(server))
      _ = try await client.get("data").value
      _ = try await client.get("data").value
      #expect(issued.value == 1)
      #expect(
        server.requests.filter { $0.path == "/data" }.allSatisfy { $0.header("Authorization") == "Bearer t1" }
      )
    }
  }

  @Test func a401RefreshesOnceAndReplays() async throws {
    let issued = Counter()
    try await withServer({ Self.routes($0, issued: issued) }) { server in
      let authenticator = Self.authenticator(server)
      let client = server.client(authenticator: authenticator)
      _ = try await client.get("data").value
      // The server rotates its key: the cached token `t1` no longer works.
      _ = issued.next()
      let (result, elapsed) = await outcome(of: client.get("data"))
      report("401, then refresh and replay", result, elapsed)
      #expect(throws: Never.self) { try result.get() }
      #expect(issued.value == 3)
      #expect(server.requests.last?.header("Authorization") == "Bearer t3")
    }
  }

  @Test func aSecond401IsReported() async throws {
    try await withServer({ router in
      router.on("POST", "/token") { _ in .respond(.json("{\"value\":\"never-good\"}")) }
      router.on("GET", "/data") { _ in .respond(.text("no", status: 401)) }
    }) { server in
      let client = server.client(authenticator: Self.authenticator(server))
      let (result, _) = await outcome(of: client.get("data"))
      #expect(httpError(result)?.statusCode == 401)
      #expect(server.requests.filter { $0.path == "/data" }.count == 2)
      #expect(server.requests.filter { $0.path == "/token" }.count == 2)
    }
  }

  @Test func concurrentRequestsShareOneFetchAndOneRefresh() async throws {
    let issued = Counter()
    try await withServer({ Self.routes($0, issued: issued, tokenDelay: .milliseconds(50)) }) { server in
      let client = server.client(authenticator: Self.authenticator(server))
      _ = try await Promise.all((0..<20).map { _ in client.get("data") }).value
      #expect(issued.value == 1)
      _ = issued.next()  // Invalidate `t1` on the server: every request now gets a 401 first.
      _ = try await Promise.all((0..<20).map { _ in client.get("data") }).value
      #expect(issued.value == 3)
    }
  }

  @Test func aFailedFetchRejectsAndTheNextRequestTriesAgain() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("POST", "/token") { _ in
        calls.next() == 1 ? .respond(.text("down", status: 500)) : .respond(.json("{\"value\":\"t\"}"))
      }
      router.on("GET", "/data") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client(authenticator: Self.authenticator(server))
      let (result, _) = await outcome(of: client.get("data"))
      #expect(httpError(result)?.statusCode == 500)
      _ = try await client.get("data").value
    }
  }

  @Test func aBasicChallengeComesBackAsA401() async throws {
    try await withServer({ router in
      router.on("GET", "/basic") { _ in
        .respond(
          ServerResponse(
            status: 401, headers: [("WWW-Authenticate", "Basic realm=\"api\"")], body: Array("login".utf8)))
      }
    }) { server in
      let client = server.client(timeout: .seconds(60))
      let (result, elapsed) = await outcome(of: client.get("basic"))
      report("401 with a Basic challenge", result, elapsed)
      guard case .unacceptableStatus(let status, let headers, _, _)? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(status == 401)
      #expect(headers["www-authenticate"] == "Basic realm=\"api\"")
      // No waiting for a credential: far below the 60 s timeout.
      #expect(elapsed < .seconds(30))
    }
  }

  // MARK: As a step, without a server

  @Test func asAStepItAttachesItsTokenAndReplaysOnlyTheFirst401OfARequest() async throws {
    let fetches = Counter()
    let authenticator = TokenAuthenticator { Promise("token-\(fetches.next())") }
    let url = try #require(URL(string: "http://127.0.0.1:9/x"))
    let first = HTTPAttempt(number: 1, method: .get, remaining: .seconds(5))
    let sent = try await authenticator.adapt(URLRequest(url: url), for: first).value
    #expect(sent.value(forHTTPHeaderField: "Authorization") == "Bearer token-1")
    var own = URLRequest(url: url)
    own.setValue("Basic mine", forHTTPHeaderField: "Authorization")
    #expect(
      try await authenticator.adapt(own, for: first).value.value(forHTTPHeaderField: "Authorization")
        == "Basic mine")

    let unauthorized = Result<HTTPResponse, HTTPError>.success(
      HTTPResponse(statusCode: 401, headers: [:], requestURL: url))
    guard case .replay = try await authenticator.decide(unauthorized, for: sent, attempt: first).value else {
      Issue.record("the first 401 was not replayed")
      return
    }
    let replayed = HTTPAttempt(number: 1, replays: 1, method: .get, remaining: .seconds(4))
    let resent = try await authenticator.adapt(URLRequest(url: url), for: replayed).value
    #expect(resent.value(forHTTPHeaderField: "Authorization") == "Bearer token-2")
    guard case .proceed = try await authenticator.decide(unauthorized, for: resent, attempt: replayed).value
    else {
      Issue.record("a second 401 was replayed")
      return
    }
    let fine = Result<HTTPResponse, HTTPError>.success(
      HTTPResponse(statusCode: 200, headers: [:], requestURL: url))
    guard case .proceed = try await authenticator.decide(fine, for: sent, attempt: first).value else {
      Issue.record("a 200 was not passed on")
      return
    }
  }
}
