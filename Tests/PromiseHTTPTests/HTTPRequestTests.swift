import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Testing

@Suite("HTTPRequest", .timeLimit(.minutes(1)))
struct HTTPRequestTests {
  @Test(arguments: [
    ["X-Note": "a\r\nInjected: yes"], ["X-Note": "a\nb"], ["X-Note": "a\rb"], ["X-Note": "nul\u{0}"],
    ["Bad Name": "v"], ["Bad:Name": "v"], ["X-Ü": "v"], ["": "v"],
  ])
  func invalidHeadersAreRefusedBeforeAnythingIsSent(headers: [String: String]) async throws {
    try await withServer({ router in
      router.on("GET", "/x") { _ in .respond(.text("ok")) }
    }) { server in
      let (result, elapsed) = await outcome(of: server.client().get("x", headers: headers))
      if headers["X-Note"] == "a\r\nInjected: yes" { report("CR/LF in a header value", result, elapsed) }
      guard case .invalidRequest? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(server.requests.isEmpty)
      #expect(server.server.connectionCount == 0)
    }
  }

  @Test func invalidDefaultHeadersAreRefusedToo() async throws {
    try await withServer({ _ in }) { server in
      let client = server.client(defaultHeaders: ["X-Bad": "1\r\n"])
      let (result, _) = await outcome(of: client.get("x"))
      guard case .invalidRequest? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(server.server.connectionCount == 0)
    }
  }

  @Test func tabsAndNonASCIIValuesAreAllowed() async throws {
    try await withServer({ router in
      router.on("GET", "/x") { request in .respond(.text(request.header("X-Note") ?? "")) }
    }) { server in
      let echoed = try await server.client().get("x", headers: ["X-Note": "a\tb"]).text().value
      #expect(echoed == "a\tb")
    }
  }

  @Test func onlyHTTPAndHTTPSAreSent() async throws {
    let client = HTTPClient(baseURL: URL(string: "file:///tmp/")!)
    let (result, _) = await outcome(of: client.get("x"))
    guard case .invalidRequest? = httpError(result) else {
      Issue.record("another outcome: \(result)")
      return
    }
    let ftp = HTTPClient(baseURL: URL(string: "http://127.0.0.1:9/")!)
    let (absolute, _) = await outcome(of: ftp.get("ftp://example.com/file"))
    guard case .invalidRequest? = httpError(absolute) else {
      Issue.record("another outcome: \(absolute)")
      return
    }
  }

  @Test func sendAcceptsAFullRequest() async throws {
    try await withServer({ router in
      router.on("OPTIONS", "/x") { _ in .respond(ServerResponse(status: 204, headers: [("Allow", "GET")])) }
    }) { server in
      let request = HTTPRequest(
        method: .options, path: "x", headers: ["X-A": "1"], acceptableStatusCodes: 204..<205)
      let response = try await server.client().send(request).value
      #expect(response.headers["allow"] == "GET")
      #expect(HTTPMethod.options.isIdempotent && !HTTPMethod.post.isIdempotent)
    }
  }
}
