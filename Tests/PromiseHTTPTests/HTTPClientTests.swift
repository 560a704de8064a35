import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

private struct Registration: Codable, Sendable, Equatable {
  let deviceID: String
}

@Suite("HTTPClient", .timeLimit(.minutes(1)))
struct HTTPClientTests {
  @Test func pathsAreRelativeToTheBaseURLPath() async throws {
    try await withServer({ router in
      router.on("GET", "/api/v1/stream/config") { _ in .respond(.json("{}")) }
    }) { server in
      let client = HTTPClient(baseURL: server.baseURL.appendingPathComponent("api/v1"))
      let response = try await client.get("stream/config").value
      #expect(response.statusCode == 200)
      #expect(server.requests.map(\.path) == ["/api/v1/stream/config"])
      #expect(response.requestURL.path == "/api/v1/stream/config")
    }
  }

  @Test func everyMethodSendsItsNameAndBody() async throws {
    try await withServer({ router in
      for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] {
        router.on(method, "/thing") { request in .respond(.text("\(request.method) \(request.bodyText)")) }
      }
    }) { server in
      let client = server.client()
      let bytes = Data("raw".utf8)
      #expect(try await client.get("thing").text().value == "GET ")
      #expect(try await client.post("thing", body: bytes).text().value == "POST raw")
      #expect(try await client.post("thing").text().value == "POST ")
      #expect(try await client.put("thing", body: bytes).text().value == "PUT raw")
      #expect(try await client.patch("thing", body: bytes).text().value == "PATCH raw")
      #expect(try await client.delete("thing").text().value == "DELETE ")
      let head = try await client.head("thing").value
      #expect(head.statusCode == 200 && head.body.isEmpty)
      #expect(server.requests.map(\.method) == ["GET", "POST", "POST", "PUT", "PATCH", "DELETE", "HEAD"])
      #expect(
        server.requests[2].bodyText.isEmpty && (server.requests[2].header("Content-Length") ?? "0") == "0")
    }
  }

  @Test func jsonBodiesAreEncodedWithTheirContentType() async throws {
    try await withServer({ router in
      router.on("POST", "/device/register") { request in .respond(.json(request.bodyText)) }
      router.on("PUT", "/device") { request in .respond(.json(request.bodyText)) }
      router.on("PATCH", "/device") { request in .respond(.json(request.bodyText)) }
    }) { server in
      let client = server.client()
      let sent = Registration(deviceID: "d-1")
      let posted = try await client.post("device/register", json: sent).decode(Registration.self).value
      #expect(posted == sent)
      let put = try await client.put("device", json: sent).decode(Registration.self).value
      #expect(put == sent)
      let patched = try await client.patch("device", json: sent).decode(Registration.self).value
      #expect(patched == sent)
      #expect(server.requests.allSatisfy { $0.header("content-type") == "application/json" })
    }
  }

  @Test func queryItemsArePercentEncodedPlusIncluded() async throws {
    try await withServer({ router in
      router.on("GET", "/search") { _ in .respond(.text("ok")) }
    }) { server in
      let query = [URLQueryItem(name: "q", value: "a b+c&d=e"), URLQueryItem(name: "page", value: "2")]
      _ = try await server.client().get("search", query: query).value
      #expect(server.requests.first?.query == "q=a%20b%2Bc%26d%3De&page=2")
    }
  }

  @Test func requestHeadersOverrideDefaultHeaders() async throws {
    try await withServer({ router in
      router.on("GET", "/h") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client(defaultHeaders: ["X-App": "story", "X-Mode": "default"])
      _ = try await client.get("h", headers: ["x-mode": "custom"]).value
      let request = try #require(server.requests.first)
      #expect(request.header("X-App") == "story")
      #expect(request.header("X-Mode") == "custom")
    }
  }

  @Test func connectionRefusedRejectsWithATransportError() async throws {
    // A reserved port nothing listens on (a stopped server's port could be reused by a server
    // another test starts meanwhile).
    let closed = try ClosedPort()
    let port = closed.port
    let client = HTTPClient(baseURL: closed.baseURL, configuration: .init(retryPolicy: .none))
    let (result, elapsed) = await outcome(of: client.get("x"))
    withExtendedLifetime(closed) {}
    report("connection refused", result, elapsed)
    guard case .transport(let error, let url)? = httpError(result) else {
      Issue.record("another outcome: \(result)")
      return
    }
    #expect(error.code == .cannotConnectToHost)
    #expect(url?.port == port)
  }

  @Test func aHundredConcurrentRequestsAllSucceed() async throws {
    try await withServer({ router in
      router.on("GET", "/n") { request in .respond(.text(request.query ?? "")) }
    }) { server in
      let client = server.client()
      let start = ContinuousClock.now
      let promises = (0..<100).map {
        client.get("n", query: [URLQueryItem(name: "i", value: "\($0)")]).text()
      }
      let (result, elapsed) = await outcome(of: Promise.all(promises), since: start)
      report("100 concurrent requests", result, elapsed)
      let bodies = try result.get()
      #expect(bodies == (0..<100).map { "i=\($0)" })
      #expect(server.requests.count == 100)
    }
  }

  @Test func theDefaultSessionKeepsNoCookies() async throws {
    try await withServer({ router in
      router.on("GET", "/login") { _ in
        .respond(ServerResponse(status: 200, headers: [("Set-Cookie", "session=s3cret; Path=/")]))
      }
      router.on("GET", "/next") { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client()
      _ = try await client.get("login").value
      _ = try await client.get("next").value
      #expect(server.requests.last?.header("Cookie") == nil)
    }
  }

  @Test func aGivenConfigurationIsUsed() async throws {
    try await withServer({ router in
      router.on("GET", "/c") { _ in .respond(.text("ok")) }
    }) { server in
      let configuration = URLSessionConfiguration.ephemeral
      configuration.httpAdditionalHeaders = ["X-From-Configuration": "yes"]
      let client = HTTPClient(
        baseURL: server.baseURL, configuration: .init(sessionConfiguration: configuration))
      _ = try await client.get("c").value
      let session = URLSession(configuration: configuration)
      let fromSession = HTTPClient(baseURL: server.baseURL, session: session)
      _ = try await fromSession.get("c").value
      #expect(server.requests.map { $0.header("X-From-Configuration") } == ["yes", "yes"])
    }
  }

  @Test func aReleasedClientStillCompletesItsRequest() async throws {
    try await withServer({ router in
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .milliseconds(100)) }
    }) { server in
      var client: HTTPClient? = server.client()
      let promise = client!.get("slow").text()
      client = nil
      let text = try await promise.value
      #expect(text == "late")
    }
  }

  @Test func aClientIsReleasedOnceItsRequestsAreDone() async throws {
    try await withServer({ router in
      router.on("GET", "/x") { _ in .respond(.text("ok")) }
    }) { server in
      weak var released: HTTPClient?
      do {
        let client = server.client()
        released = client
        _ = try await client.get("x").value
      }
      #expect(released == nil)
    }
  }
}
