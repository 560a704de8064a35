import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Every way an error can be shown, for checking that no secret is in any of them.
private func renderings(of error: HTTPError) -> [String] {
  var dumped = ""
  dump(error, to: &dumped)
  return [error.description, String(reflecting: error), "\(error)", error.localizedDescription, dumped]
}

@Suite("Redaction", .timeLimit(.minutes(1)))
struct RedactionTests {
  @Test func statusErrorsShowNoCredentials() async throws {
    try await withServer({ router in
      router.on("GET", "/private") { _ in
        .respond(
          ServerResponse(
            status: 403, headers: [("Set-Cookie", "session=s3cret"), ("WWW-Authenticate", "Bearer")],
            body: Array("forbidden".utf8)))
      }
    }) { server in
      var base = try #require(URLComponents(url: server.baseURL, resolvingAgainstBaseURL: false))
      base.user = "alice"
      base.password = "pa55word"
      let client = HTTPClient(baseURL: try #require(base.url), configuration: .init(retryPolicy: .none))
      let (result, _) = await outcome(
        of: client.get("private", headers: ["Authorization": "Bearer s3cret", "Cookie": "id=s3cret"]))
      let error = try #require(httpError(result))
      #expect(error.statusCode == 403)
      for text in renderings(of: error) {
        #expect(!text.contains("s3cret"), "\(text)")
        #expect(!text.contains("pa55word"), "\(text)")
      }
      #expect(error.description.contains("forbidden"))
    }
  }

  @Test func transportErrorsShowNoUserInfo() async throws {
    // A reserved port nothing listens on, so the request fails in transport.
    let closed = try ClosedPort()
    let client = HTTPClient(
      baseURL: URL(string: "http://bob:pa55word@127.0.0.1:\(closed.port)/")!,
      configuration: .init(retryPolicy: .none))
    let (result, _) = await outcome(of: client.get("x"))
    withExtendedLifetime(closed) {}
    let error = try #require(httpError(result))
    for text in renderings(of: error) {
      #expect(!text.contains("pa55word"), "\(text)")
    }
  }

  @Test func invalidRequestErrorsShowNoCredentialValues() async throws {
    let client = HTTPClient(baseURL: URL(string: "http://127.0.0.1:9/")!)
    let (result, _) = await outcome(of: client.get("x", headers: ["Authorization": "Bearer s3cret\r\nX: y"]))
    let error = try #require(httpError(result))
    for text in renderings(of: error) {
      #expect(!text.contains("s3cret"), "\(text)")
    }
  }

  @Test func timeoutAndSizeErrorsShowNoUserInfo() throws {
    let url = try #require(URL(string: "http://carol:pa55word@example.com/a"))
    for error in [HTTPError.timedOut(url: url, deadline: .seconds(1)), .tooLarge(limit: 1, url: url)] {
      #expect(!error.description.contains("pa55word"))
    }
  }

  @Test func dumpsOfClientsRequestsResponsesAndAuthenticatorsShowNoCredentials() async throws {
    let url = try #require(URL(string: "http://dave:pa55word@127.0.0.1:9/api/"))
    let authenticator = TokenAuthenticator { Promise("s3cret") }
    let client = HTTPClient(
      baseURL: url,
      configuration: .init(defaultHeaders: ["Authorization": "Bearer s3cret"], authenticator: authenticator))
    let request = HTTPRequest(
      path: "x", headers: ["Cookie": "id=s3cret", "Proxy-Authorization": "Basic s3cret"])
    let response = HTTPResponse(
      statusCode: 200, headers: ["Set-Cookie": "id=s3cret"], requestURL: url.appendingPathComponent("x"))
    var texts: [String] = []
    for value in [client, request, response, authenticator] as [Any] {
      var dumped = ""
      dump(value, to: &dumped)
      texts += [dumped, String(describing: value), String(reflecting: value)]
    }
    for text in texts {
      #expect(!text.contains("s3cret") && !text.contains("pa55word"), "\(text)")
    }
  }

  @Test func errorsAndDescriptionsRedactTheSensitiveHeadersOfTheClient() async throws {
    let secrets: [(String, String)] = [
      ("X-Api-Key", "k-s3cret"), ("x-session", "s-s3cret"), ("X-Visible", "shown"),
    ]
    try await withServer({ router in
      router.on("GET", "/private") { _ in
        .respond(ServerResponse(status: 403, headers: secrets, body: Array("forbidden".utf8)))
      }
      router.on("GET", "/accepted") { _ in .respond(ServerResponse(status: 202, headers: secrets)) }
    }) { server in
      let client = server.client(
        sensitiveHeaders: HTTPClient.defaultSensitiveHeaders.union(["X-Session"]),
        defaultHeaders: ["X-SESSION": "d-s3cret"])
      var texts: [String] = []
      let (status, _) = await outcome(of: client.get("private"))
      texts += try renderings(of: #require(httpError(status)))
      let (narrowed, _) = await outcome(of: client.get("accepted").validate(statusCodes: 200..<201))
      texts += try renderings(of: #require(httpError(narrowed)))
      let (invalid, _) = await outcome(of: client.get("private", headers: ["x-session": "i-s3cret\r\nX: y"]))
      texts += try renderings(of: #require(httpError(invalid)))
      let response = try await client.get("accepted").value
      var dumped = ""
      dump(response, to: &dumped)
      dump(client, to: &dumped)
      texts += [response.description, "\(response.headers)", dumped, String(describing: client)]
      for text in texts {
        #expect(!text.contains("s3cret"), "\(text)")
      }
      // The headers are in the debug description (`String(reflecting:)`), not in the log line.
      #expect(!texts[0].contains("shown"))
      #expect(texts[1].contains("shown"))
      #expect(response.headers["X-Session"] == "s-s3cret", "the value itself is kept for code that reads it")
    }
  }
}
