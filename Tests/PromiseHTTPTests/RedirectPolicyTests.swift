import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

@Suite("RedirectPolicy", .timeLimit(.minutes(1)))
struct RedirectPolicyTests {
  /// Routes `/a` → 302 to `/b` (with a body), and `/b` → 200.
  static func routes(_ router: Router) {
    router.on("GET", "/a") { _ in
      .respond(ServerResponse(status: 302, headers: [("Location", "/b")], body: Array("see /b".utf8)))
    }
    router.on("GET", "/b") { _ in .respond(.text("b")) }
  }

  @Test func notFollowingRejectsWithTheRedirectStatus() async throws {
    try await withServer(Self.routes) { server in
      let (result, elapsed) = await outcome(of: server.client(redirectPolicy: .doNotFollow).get("a"))
      report("302 with redirectPolicy .doNotFollow", result, elapsed)
      guard case .unacceptableStatus(let status, let headers, let excerpt, let url)? = httpError(result)
      else {
        Issue.record("expected unacceptableStatus, got \(result)")
        return
      }
      #expect(status == 302)
      #expect(headers["Location"] == "/b")
      #expect(excerpt == "see /b")
      #expect(url.path == "/a")
      #expect(server.requests.map(\.path) == ["/a"])
    }
  }

  @Test func notFollowingAndAcceptingRedirectStatusesAnswersWithTheRedirect() async throws {
    try await withServer(Self.routes) { server in
      let client = server.client(redirectPolicy: .doNotFollow, acceptableStatusCodes: 200..<400)
      #expect(client.maximumRedirects == 0)
      let response = try await client.get("a").value
      #expect(response.statusCode == 302)
      #expect(response.headers["location"] == "/b")
      #expect(response.text == "see /b")
      #expect(response.url.path == "/a")
      #expect(server.requests.map(\.path) == ["/a"])
    }
  }

  @Test func oneRequestCanNotFollowWhileTheClientFollows() async throws {
    try await withServer(Self.routes) { server in
      let client = server.client()
      #expect(client.redirectPolicy == .follow(maximum: 10))
      let own = try await client.send(
        HTTPRequest(path: "a", acceptableStatusCodes: 200..<400, redirectPolicy: .doNotFollow)
      ).value
      #expect(own.statusCode == 302)
      let followed = try await client.get("a").value
      #expect(followed.statusCode == 200)
      #expect(server.requests.map(\.path) == ["/a", "/a", "/b"])
    }
  }

  @Test func followingNoneRejectsTheFirstRedirectAsTooMany() async throws {
    try await withServer(Self.routes) { server in
      let (result, _) = await outcome(of: server.client(redirectPolicy: .follow(maximum: 0)).get("a"))
      guard case .tooManyRedirects(let limit, _)? = httpError(result) else {
        Issue.record("expected tooManyRedirects, got \(result)")
        return
      }
      #expect(limit == 0)
      #expect(server.requests.count == 1)
    }
  }

  @Test func notFollowingAnswersEvenARedirectToAnotherScheme() async throws {
    try await withServer({ router in
      router.on("GET", "/file") { _ in .respond(.redirect(to: "file:///etc/passwd", status: 301)) }
    }) { server in
      let client = server.client(redirectPolicy: .doNotFollow, acceptableStatusCodes: 200..<400)
      let response = try await client.get("file").value
      #expect(response.statusCode == 301)
      #expect(response.headers["Location"] == "file:///etc/passwd")
      #expect(server.requests.count == 1)
    }
  }

  @Test func theMaximumOfAPolicyIsNeverNegative() {
    #expect(RedirectPolicy.default == .follow(maximum: HTTPClient.defaultMaximumRedirects))
    #expect(RedirectPolicy.follow(maximum: 3).maximumRedirects == 3)
    #expect(RedirectPolicy.follow(maximum: -1).maximumRedirects == 0)
    #expect(RedirectPolicy.doNotFollow.maximumRedirects == 0)
  }
}
