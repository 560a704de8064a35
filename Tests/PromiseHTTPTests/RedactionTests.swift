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

@Suite("Redaction of query parameters and bodies", .timeLimit(.minutes(1)))
struct RedactionOfParametersTests {
  @Test(arguments: [
    "access_token", "ACCESS_TOKEN", "token", "X-Amz-Signature", "X-Goog-Signature", "X-Amz-Security-Token",
    "oauth_token", "accessToken", "apiKey", "api-key", "client_secret", "code", "sig", "session.id",
    "password",
  ])
  func secretLookingNamesAreRedactedFromURLs(_ name: String) throws {
    let url = try #require(URL(string: "https://api.example.com/a?\(name)=s3cret&page=2"))
    let text = "\(HTTPError.timedOut(url: url, deadline: .seconds(1)))"
    #expect(text.contains("?\(name)=<redacted>&page=2"), "\(text)")
  }

  @Test(arguments: ["page", "limit", "q", "authenticated", "tokens_left", "keyboard"])
  func otherNamesAreKept(_ name: String) throws {
    let url = try #require(URL(string: "https://api.example.com/a?\(name)=shown"))
    #expect("\(HTTPError.tooLarge(limit: 1, url: url))".contains("?\(name)=shown"))
  }

  @Test func aFragmentWrittenAsAQueryIsRedactedToo() throws {
    let url = try #require(URL(string: "https://app.example.com/cb#access_token=s3cret&state=ok"))
    #expect(
      HTTPError.tooManyRedirects(limit: 1, url: url).description
        == "too many redirects (a loop, or more than 1) for https://app.example.com/cb#access_token=<redacted>&state=ok"
    )
  }

  @Test func jsonMembersAreRedactedInTheExcerptEvenWhenItCutsTheirValue() throws {
    let url = try #require(URL(string: "https://api.example.com/"))
    let body =
      "{\"user\": \"ann\", \"password\" : 12345, \"nested\": {\"refresh_token\": \"r-s3cret\"}, \"id_token\": \"eyJ"
      + String(repeating: "x", count: 600) + "\"}"
    let response = HTTPResponse(statusCode: 200, body: Data(body.utf8), requestURL: url)
    let excerpt = response.bodyExcerpt()
    #expect(
      excerpt
        == "{\"user\": \"ann\", \"password\" : \"<redacted>\", \"nested\": {\"refresh_token\": \"<redacted>\"},"
        + " \"id_token\": \"<redacted>\"…")
    #expect(response.text == body, "the body itself is kept")
  }

  @Test func formFieldsAreRedactedByContentTypeOrShape() throws {
    let url = try #require(URL(string: "https://api.example.com/"))
    let form = "access_token=a-s3cret&token_type=bearer&scope=read+write"
    for headers: HTTPHeaders in [["Content-Type": "application/x-www-form-urlencoded; charset=utf-8"], [:]] {
      let response = HTTPResponse(statusCode: 200, headers: headers, body: Data(form.utf8), requestURL: url)
      #expect(response.bodyExcerpt() == "access_token=<redacted>&token_type=<redacted>&scope=read+write")
    }
    let prose = HTTPResponse(statusCode: 200, body: Data("see a=b for details".utf8), requestURL: url)
    #expect(prose.bodyExcerpt() == "see a=b for details")
  }

  @Test func theExcerptStaysBoundedWhenRedactionLengthensIt() throws {
    let url = try #require(URL(string: "https://api.example.com/"))
    let body = "[" + Array(repeating: "{\"code\":1}", count: 100).joined(separator: ",") + "]"
    let excerpt = HTTPResponse(statusCode: 200, body: Data(body.utf8), requestURL: url).bodyExcerpt(limit: 64)
    #expect(excerpt.count == 65)
    #expect(excerpt.hasSuffix("…") && excerpt.hasPrefix("[{\"code\":\"<redacted>\"},"))
  }

  @Test func aClientRedactsByItsOwnList() async throws {
    try await withServer({ router in
      router.on("GET", "/gone") { _ in
        .respond(.json("{\"ticket\": \"t-s3cret\", \"code\": \"E42\"}", status: 410))
      }
    }) { server in
      let lines = Recorder<String>()
      let names = HTTPClient.defaultSensitiveQueryParameters.union(["ticket"]).subtracting(["code"])
      let client = HTTPClient(
        baseURL: server.baseURL,
        configuration: .init(
          retryPolicy: .none, sensitiveQueryParameters: names,
          interceptors: [HTTPLogger(sensitiveQueryParameters: names) { lines.append($0) }]))
      #expect(client.sensitiveQueryParameters == names)
      let query = [URLQueryItem(name: "ticket", value: "q-s3cret"), URLQueryItem(name: "code", value: "E42")]
      let (result, _) = await outcome(of: client.get("gone", query: query))
      guard case .unacceptableStatus(_, _, let excerpt, let url)? = httpError(result) else { return }
      #expect(url.query == "ticket=%3Credacted%3E&code=E42")
      #expect(excerpt == "{\"ticket\": \"<redacted>\", \"code\": \"E42\"}")
      #expect(await eventually { lines.all.count == 3 })
      #expect(lines.all.first?.contains("?ticket=<redacted>&code=E42") == true, "\(lines.all)")
      #expect(!lines.all.joined().contains("s3cret"))
    }
  }
}
