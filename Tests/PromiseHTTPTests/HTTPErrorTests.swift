import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Testing

@Suite("HTTPError", .timeLimit(.minutes(1)))
struct HTTPErrorTests {
  /// The headers a real API sends with a 404: none belongs in a log line.
  private static let noisyHeaders = [
    ("Date", "Tue, 01 Dec 2026 10:00:00 GMT"), ("Server", "nginx/1.25"),
    ("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Headers", "Authorization, Content-Type"),
    ("Set-Cookie", "session=s3cret"), ("X-Request-Id", "req-42"),
  ]

  @Test func aStatusErrorsDescriptionIsOneLineWithStatusReasonURLAndTheStartOfTheBody() async throws {
    let body =
      "{\n  \"error\": \"no such config\",\n  \"detail\": \"" + String(repeating: "d", count: 400) + "\"\n}"
    try await withServer({ router in
      router.on("GET", "/missing") { _ in
        .respond(ServerResponse(status: 404, headers: Self.noisyHeaders, body: Array(body.utf8)))
      }
    }) { server in
      let query = [URLQueryItem(name: "page", value: "2"), URLQueryItem(name: "api_key", value: "k-s3cret")]
      let (result, _) = await outcome(of: server.client().get("missing", query: query))
      let error = try #require(httpError(result))
      let url = "\(server.baseURL)missing?page=2&api_key=<redacted>"
      let start = "HTTP status 404 (Not Found) for \(url): { \"error\": \"no such config\", \"detail\": \"ddd"
      #expect(error.description.hasPrefix(start), "\(error.description)")
      #expect(error.description.hasSuffix("…"))
      #expect(error.description.count <= start.count + 120)
      #expect(!error.description.contains("\n"))
      for header in ["Date", "nginx", "Access-Control", "X-Request-Id", "Set-Cookie"] {
        #expect(!error.description.contains(header), "\(header)")
      }
      #expect("\(error)" == error.description)
      #expect(error.localizedDescription == error.description)
    }
  }

  @Test func aStatusErrorsDebugDescriptionAddsTheRedactedHeadersAndTheWholeExcerpt() async throws {
    let body = "{\"error\": \"no such config\", \"detail\": \"" + String(repeating: "d", count: 300) + "\"}"
    try await withServer({ router in
      router.on("GET", "/missing") { _ in
        .respond(ServerResponse(status: 404, headers: Self.noisyHeaders, body: Array(body.utf8)))
      }
    }) { server in
      let (result, _) = await outcome(of: server.client().get("missing"))
      let error = try #require(httpError(result))
      let debug = String(reflecting: error)
      #expect(debug == error.debugDescription)
      #expect(
        debug.hasPrefix("HTTP status 404 (Not Found) for \(server.baseURL)missing (headers: ["), "\(debug)")
      for field in [
        "Date: Tue, 01 Dec 2026 10:00:00 GMT", "Server: nginx/1.25", "Access-Control-Allow-Origin: *",
        "X-Request-Id: req-42", "Set-Cookie: <redacted>",
      ] {
        #expect(debug.contains(field), "\(field)")
      }
      #expect(debug.hasSuffix(", body: \(body))"))
      #expect(!debug.contains("s3cret"))
    }
  }

  @Test func reasonPhrasesComeFromTheStatus() throws {
    let url = try #require(URL(string: "https://api.example.com/v1/config"))
    let cases: [(Int, String)] = [
      (401, "Unauthorized"), (429, "Too Many Requests"), (500, "Internal Server Error"),
      (503, "Service Unavailable"),
    ]
    for (status, reason) in cases {
      let error = HTTPError.unacceptableStatus(statusCode: status, headers: [:], bodyExcerpt: "", url: url)
      #expect(error.description == "HTTP status \(status) (\(reason)) for https://api.example.com/v1/config")
    }
  }

  @Test func aDecodingErrorsDescriptionShowsTheStartOfTheBodyAndItsDebugDescriptionAllOfIt() throws {
    let url = try #require(URL(string: "https://api.example.com/token?code=c-s3cret"))
    let excerpt = "{\"token\": \"t-s3cret\", \"note\": \"" + String(repeating: "n", count: 200) + "\"}"
    let error = HTTPError.decoding(
      type: "Token", codingPath: "token", detail: "expected Int", bodyExcerpt: excerpt, url: url)
    #expect(
      error.description.hasPrefix(
        "could not decode Token at 'token' from the body of https://api.example.com/token?code=<redacted>:"
          + " expected Int (body: {\"token\": \"<redacted>\", \"note\": \"nnn"))
    #expect(error.description.hasSuffix("…)"))
    #expect(error.debugDescription.hasSuffix("nnn\"})"))
    for text in [error.description, error.debugDescription] { #expect(!text.contains("s3cret")) }
  }
}
