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
    // The `id_token` is longer than the bytes an excerpt is redacted from (four times its limit).
    let url = try #require(URL(string: "https://api.example.com/"))
    let body =
      "{\"user\": \"ann\", \"password\" : 12345, \"nested\": {\"refresh_token\": \"r-s3cret\"}, \"id_token\": \"eyJ"
      + String(repeating: "x", count: 3000) + "\"}"
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
      guard case .unacceptableStatus(_, _, let excerpt, let url)? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(url.query == "ticket=%3Credacted%3E&code=E42")
      #expect(excerpt == "{\"ticket\": \"<redacted>\", \"code\": \"E42\"}")
      #expect(await eventually { lines.all.count == 3 })
      #expect(lines.all.first?.contains("?ticket=<redacted>&code=E42") == true, "\(lines.all)")
      #expect(!lines.all.joined().contains("s3cret"))
    }
  }
}

/// The URLs a body excerpt quotes (httpbin's `/get` echoes the request's, a form names a
/// `redirect_uri`) carry no credential either: their secret query values and user-info are
/// redacted wherever they stand, not only as the value of a member whose key looks secret.
@Suite("Redaction of URLs in body excerpts", .timeLimit(.minutes(1)))
struct RedactionOfURLsInExcerptsTests {
  static let url = URL(string: "https://api.example.com/")!

  /// The excerpt of `body`, bounded to `limit` bytes, as a response of `headers` has it.
  static func excerpt(_ body: String, headers: HTTPHeaders = [:], limit: Int = HTTPError.excerptLimit)
    -> String
  {
    HTTPResponse(statusCode: 200, headers: headers, body: Data(body.utf8), requestURL: url).bodyExcerpt(
      limit: limit)
  }

  @Test(arguments: ["access_token", "api_key", "password"])
  func aJSONStringHoldingAURLHasItsSecretQueryValuesRedacted(_ name: String) {
    let body =
      #"{"args": {}, "origin": "127.0.0.1", "url": "http://127.0.0.1:8080/get?page=2&\#(name)=s3cret&q=x"}"#
    let excerpt = Self.excerpt(body)
    #expect(!excerpt.contains("s3cret"), "\(excerpt)")
    #expect(
      excerpt
        == #"{"args": {}, "origin": "127.0.0.1", "url": "http://127.0.0.1:8080/get?page=2&\#(name)=<redacted>&q=x"}"#
    )
  }

  @Test func theUserInfoOfAURLIsRemoved() {
    let excerpt = Self.excerpt(#"{"url": "http://user:pa55word@example.com/get"}"#)
    #expect(excerpt == #"{"url": "http://example.com/get"}"#)
  }

  @Test func aURLInPlainTextIsRedacted() {
    let excerpt = Self.excerpt("Redirecting to https://app.example.com/cb?code=s3cret&state=ok now.")
    #expect(excerpt == "Redirecting to https://app.example.com/cb?code=<redacted>&state=ok now.")
  }

  @Test func aPercentEncodedURLInAFormValueIsRedacted() {
    let form =
      "redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb%3Faccess_token%3Ds3cret%26state%3Dok&scope=read"
    for headers: HTTPHeaders in [["Content-Type": "application/x-www-form-urlencoded"], [:]] {
      let excerpt = Self.excerpt(form, headers: headers)
      #expect(!excerpt.contains("s3cret"), "\(excerpt)")
      #expect(
        excerpt
          == "redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb%3Faccess_token%3D%3Credacted%3E%26state%3Dok&scope=read"
      )
    }
  }

  @Test func aJSONEscapedURLIsRedacted() {
    let excerpt = Self.excerpt(#"{"url":"http:\/\/user:pa55word@host\/get?token=s3cret","ok":true}"#)
    #expect(!excerpt.contains("s3cret") && !excerpt.contains("pa55word"), "\(excerpt)")
    #expect(excerpt.hasPrefix(#"{"url":"http://host/get?token=<redacted>""#), "\(excerpt)")
    // Go's encoder writes `&` as `\u0026`.
    let go = Self.excerpt(#"{"url":"http://host/get?a=1\u0026access_token=s3cret\u0026b=2"}"#)
    #expect(!go.contains("s3cret"), "\(go)")
  }

  @Test func aURLInTheQueryOfAnotherIsRedacted() {
    let excerpt = Self.excerpt(
      "see https://login.example.com/?next=https%3A%2F%2Fapp.example.com%2F%3Fsession%3Ds3cret&lang=en")
    #expect(!excerpt.contains("s3cret"), "\(excerpt)")
    #expect(excerpt.hasSuffix("&lang=en"), "\(excerpt)")
  }

  @Test func aURLInAQueryValueOfTheRequestIsRedactedInTheErrorsURL() async throws {
    let next = "https://app.example.com/cb?access_token=s3cret&state=ok"
    let query = [URLQueryItem(name: "next", value: next), URLQueryItem(name: "page", value: "2")]
    try await withServer({ router in router.on("GET", "/login") { _ in .respond(.text("no", status: 404)) } })
    {
      server in
      let (result, _) = await outcome(of: server.client().get("login", query: query))
      let error = try #require(httpError(result))
      let url = try #require(error.url)
      #expect(!url.absoluteString.contains("s3cret"), "\(url)")
      #expect(!error.description.contains("s3cret"), "\(error)")
      let kept = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems
      #expect(kept?.first?.value == "https://app.example.com/cb?access_token=<redacted>&state=ok")
      #expect(kept?.last?.value == "2")
    }
  }

  @Test func aURLWithoutSecretsIsKeptAsItIs() {
    let body = #"{"url": "http:\/\/host\/get?page=2", "form": "next=https%3A%2F%2Fhost%2F%3Fq%3D1"}"#
    #expect(Self.excerpt(body) == body)
  }

  /// Secrets of characters found nowhere else in the bodies: no cut may show even one of them.
  @Test(arguments: [
    #"{"id_token": "QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ", "url": "http://alice:QQQQQQQQ@example.com/get?access_token=QQQQQQQQQQQQ&page=2"}"#,
    #"{"url":"http:\/\/alice:QQQQQQQQ@example.com\/get?page=2\u0026api_key=QQQQQQQQQQ\u0026x=1"}"#,
    "See http://alice:QQQQQQQQ@example.com/get?password=QQQQQQQQQQ&page=2 for details",
    "redirect_uri=https%3A%2F%2Falice%3AQQQQQQQQ%40example.com%2Fcb%3Ftoken%3DQQQQQQQQQ%26state%3Dok&scope=read",
  ])
  func noCutOfTheExcerptShowsAnyOfASecret(_ body: String) {
    for limit in 1...body.utf8.count + 1 {
      let excerpt = Self.excerpt(body, limit: limit)
      #expect(!excerpt.contains("Q"), "limit \(limit): \(excerpt)")
      #expect(excerpt.count <= limit + 1, "limit \(limit): \(excerpt)")
    }
  }

  @Test func anExcerptMadeByHandIsRedactedWhenShown() throws {
    let error = HTTPError.decoding(
      type: "Token", codingPath: "", detail: "see https://example.com/?token=s3cret",
      bodyExcerpt: #"{"url": "http://example.com/get?access_token=s3cret", "next": "http://alice:s3c…"#,
      url: Self.url)
    var dumped = ""
    dump(error, to: &dumped)
    for text in [error.description, String(reflecting: error), error.localizedDescription, dumped] {
      #expect(!text.contains("s3c"), "\(text)")
    }
  }
}
