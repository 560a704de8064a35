import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What a redirect does to the request's body (RFC 9110 §15.4): a 307 or 308 repeats the request
/// as it was, a 301 or 302 turns only a `POST` into a `GET`, a 303 makes a `GET`; a request
/// turned into a `GET` loses its body and the fields that describe it.
///
/// FoundationNetworking sends every hop without its body (found against httpbin: a `PUT` of JSON
/// followed a 307 as a `PUT` with `Content-Length: 0`), so the client follows such hops itself.
@Suite("Redirects and request bodies", .timeLimit(.minutes(1)))
struct RedirectBodyTests {
  /// Routes `/from` (any of the methods used here) to a `status` redirect to `/to`, and
  /// answers `/to` with what it received: `METHOD content-type body`.
  private func echoBehindRedirect(status: Int, to target: String = "/to") -> (Router) -> Void {
    { router in
      for method in ["POST", "PUT", "PATCH", "DELETE"] {
        router.on(method, "/from") { _ in .respond(.redirect(to: target, status: status)) }
      }
      for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        router.on(method, "/to") { request in
          .respond(.text("\(request.method) \(request.header("Content-Type") ?? "-") \(request.bodyText)"))
        }
      }
    }
  }

  @Test(arguments: [307, 308])
  func aTemporaryOrPermanentRedirectRepeatsTheMethodAndTheBody(status: Int) async throws {
    try await withServer(echoBehindRedirect(status: status)) { server in
      let client = server.client()
      let posted = try await client.post(
        "from", headers: ["Content-Type": "text/plain"], body: Data("payload".utf8)
      ).value
      #expect(posted.text == "POST text/plain payload")
      let put = try await client.put("from", json: ["k": 1]).value
      #expect(put.text == #"PUT application/json {"k":1}"#)
      #expect(put.url.path == "/to")
      #expect(put.requestURL.path == "/from")
      let sent = server.requests.filter { $0.path == "/to" }
      #expect(sent.map(\.body.count) == [7, 7])
    }
  }

  @Test(arguments: [301, 302])
  func aMovedOrFoundRedirectKeepsTheBodyOfAnythingButAPost(status: Int) async throws {
    try await withServer(echoBehindRedirect(status: status)) { server in
      let client = server.client()
      let patched = try await client.patch("from", json: ["k": 2]).value
      #expect(patched.text == #"PATCH application/json {"k":2}"#)
      // A POST becomes a GET, as browsers and FoundationNetworking do it.
      let posted = try await client.post(
        "from", headers: ["Content-Type": "text/plain"], body: Data("payload".utf8)
      ).value
      #expect(posted.text == "GET - ")
    }
  }

  @Test func aSeeOtherRedirectMakesAGetWithoutTheFieldsThatDescribedTheBody() async throws {
    try await withServer(echoBehindRedirect(status: 303)) { server in
      let response = try await server.client().put("from", json: ["k": 3]).value
      #expect(response.text == "GET - ")
      let hop = try #require(server.requests.last)
      #expect(hop.header("Content-Type") == nil)
      #expect(hop.body.isEmpty)
    }
  }

  @Test func aRequestWithoutABodyIsFollowedAsBefore() async throws {
    try await withServer(echoBehindRedirect(status: 307)) { server in
      let response = try await server.client().delete("from").value
      #expect(response.text == "DELETE - ")
    }
  }

  @Test func hopsFollowedByTheClientCountTowardsTheLimitAndStopALoop() async throws {
    try await withServer({ router in
      router.on("POST", "/ping") { _ in .respond(.redirect(to: "/pong", status: 307)) }
      router.on("POST", "/pong") { _ in .respond(.redirect(to: "/ping", status: 308)) }
      router.on("POST", "/hop") { request in
        let next = Int(request.query?.dropFirst(2) ?? "0") ?? 0
        return .respond(.redirect(to: "/hop?n=\(next + 1)", status: 307))
      }
    }) { server in
      let (looped, _) = await outcome(of: server.client().post("ping", body: Data("x".utf8)))
      guard case .tooManyRedirects? = httpError(looped) else {
        Issue.record("expected tooManyRedirects, got \(looped)")
        return
      }
      #expect(server.requests.map(\.path) == ["/ping", "/pong"])
      let limited = server.client(redirectPolicy: .follow(maximum: 3))
      let (endless, _) = await outcome(
        of: limited.post("hop", query: [.init(name: "n", value: "0")], body: Data("x".utf8)))
      guard case .tooManyRedirects(let limit, _)? = httpError(endless) else {
        Issue.record("expected tooManyRedirects, got \(endless)")
        return
      }
      #expect(limit == 3)
      #expect(server.requests.count == 2 + 4)
      #expect(server.requests.allSatisfy { $0.bodyText == "x" })
    }
  }

  @Test func credentialsDoNotFollowAHopTheClientFollowsToAnotherOrigin() async throws {
    try await withServer({ router in
      router.on("POST", "/to") { request in .respond(.text(request.bodyText)) }
    }) { server in
      let other = server.server.secondBaseURL.appendingPathComponent("to").absoluteString
      server.router.on("POST", "/away") { _ in .respond(.redirect(to: other, status: 307)) }
      let response = try await server.client().post(
        "away", headers: ["Authorization": "Bearer s3cret", "X-Trace": "t-1"], body: Data("body".utf8)
      ).value
      #expect(response.text == "body")
      #expect(response.url.host == "127.0.0.2")
      let arrived = try #require(server.requests.last)
      #expect(arrived.host == "127.0.0.2")
      #expect(arrived.header("Authorization") == nil)
      #expect(arrived.header("X-Trace") == "t-1")
    }
  }

  @Test func cancellingDuringAHopTheClientFollowsEndsTheRequest() async throws {
    try await withServer({ router in
      router.on("POST", "/from") { _ in .respond(.redirect(to: "/stream", status: 307)) }
      router.on("POST", "/stream") { _ in CancellationTests.endless }
    }) { server in
      let promise = server.client().post("from", body: Data("x".utf8))
      // Cancel once the hop has reached the server: the task the client started itself must go.
      #expect(await server.arrived(2))
      promise.cancel()
      let (result, _) = await outcome(of: promise)
      #expect(throws: CancellationError.self) { try result.get() }
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }

  @Test func theBodyOfTheRedirectItselfDoesNotCountAgainstTheLimit() async throws {
    try await withServer({ router in
      router.on("POST", "/from") { _ in
        .respond(
          ServerResponse(
            status: 307, headers: [("Location", "/to")],
            body: Array(repeating: UInt8(ascii: "r"), count: 50_000)))
      }
      router.on("POST", "/to") { request in .respond(.text(request.bodyText)) }
    }) { server in
      let client = server.client(maximumResponseSize: 10_000)
      let response = try await client.post("from", body: Data("x".utf8)).value
      #expect(response.text == "x")
    }
  }

  @Test func theBodyRulesArePure() throws {
    let url = try #require(URL(string: "http://127.0.0.1/x"))
    var original = URLRequest(url: url)
    original.httpMethod = "PUT"
    original.httpBody = Data("b".utf8)
    original.setValue("application/json", forHTTPHeaderField: "Content-Type")
    var kept = original
    kept.httpBody = nil
    Redirects.carryBody(of: original, into: &kept, status: 307)
    #expect(kept.httpBody == Data("b".utf8))
    #expect(Redirects.repeatsBody(kept))
    var turned = original
    turned.httpMethod = "GET"
    Redirects.carryBody(of: original, into: &turned, status: 303)
    #expect(turned.httpBody == nil)
    #expect(turned.value(forHTTPHeaderField: "Content-Type") == nil)
    #expect(!Redirects.repeatsBody(turned))
    // A 303 retrieves without content, even a GET that had a body.
    var getWithBody = original
    getWithBody.httpMethod = "GET"
    var seeOther = getWithBody
    Redirects.carryBody(of: getWithBody, into: &seeOther, status: 303)
    #expect(seeOther.httpBody == nil)
    var empty = original
    empty.httpBody = Data()
    var hop = empty
    Redirects.carryBody(of: empty, into: &hop, status: 308)
    #expect(!Redirects.repeatsBody(hop), "an empty body needs no repeat")
  }
}
