import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Testing

@Suite("HTTPResponse", .timeLimit(.minutes(1)))
struct HTTPResponseTests {
  @Test func carriesStatusHeadersBodyAndURLs() async throws {
    try await withServer({ router in
      router.on("GET", "/created") { _ in
        .respond(ServerResponse(status: 201, headers: [("X-Request-Id", "42")], body: Array("made".utf8)))
      }
    }) { server in
      let response = try await server.client().get("created").value
      #expect(response.statusCode == 201)
      #expect(response.headers["x-request-id"] == "42")
      #expect(response.body == Data("made".utf8))
      #expect(response.text == "made")
      #expect(response.url == server.baseURL.appendingPathComponent("created"))
      #expect(response.requestURL == response.url)
    }
  }

  @Test func urlsNeverKeepUserInfo() throws {
    let url = try #require(URL(string: "http://user:pa55word@example.com/a"))
    let response = HTTPResponse(statusCode: 200, requestURL: url)
    #expect(!response.url.absoluteString.contains("pa55word"))
    #expect(!response.description.contains("pa55word"))
  }

  @Test func bodyExcerptIsBounded() throws {
    let url = try #require(URL(string: "http://example.com/"))
    let response = HTTPResponse(
      statusCode: 500, body: Data(repeating: UInt8(ascii: "x"), count: 10_000), requestURL: url)
    #expect(response.bodyExcerpt().count == HTTPError.excerptLimit + 1)
  }
}
