import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Testing

@Suite("HTTPPath", .timeLimit(.minutes(1)))
struct HTTPPathTests {
  @Test func segmentsArePercentEncoded() {
    #expect(HTTPPath(segments: "users", "a/b", "x y?z#w%").string == "users/a%2Fb/x%20y%3Fz%23w%25")
    #expect(HTTPPath(segments: "é").string == "%C3%A9")
    #expect(HTTPPath(segments: "../admin").string == "..%2Fadmin")
    #expect(HTTPPath(segments: "users").appending("42").string == "users/42")
  }

  @Test func untrustedInputStaysInOneSegment() async throws {
    try await withServer({ router in
      router.on("GET", "/api/users/..%2Fadmin") { _ in .respond(.text("user")) }
    }) { server in
      let client = HTTPClient(
        baseURL: server.baseURL.appendingPathComponent("api"), configuration: .init(retryPolicy: .none))
      _ = try await client.get(HTTPPath(segments: "users", "../admin").string).value
      #expect(server.requests.map(\.path) == ["/api/users/..%2Fadmin"])
    }
  }

  @Test func dotSegmentsAreRefusedBeforeSending() async throws {
    try await withServer({ _ in }) { server in
      let client = HTTPClient(
        baseURL: server.baseURL.appendingPathComponent("api"), configuration: .init(retryPolicy: .none))
      for path in [HTTPPath(segments: "users", "..").string, "../admin", "a/./b", "%2e%2E/x", "."] {
        let (result, _) = await outcome(of: client.get(path))
        guard case .invalidRequest(let what)? = httpError(result) else {
          Issue.record("another outcome: \(result)")
          continue
        }
        #expect(what.contains("segment"))
      }
      #expect(server.requests.isEmpty)
    }
  }
}
