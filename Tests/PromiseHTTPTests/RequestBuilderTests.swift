import Foundation
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("RequestBuilder")
struct RequestBuilderTests {
  /// One row of the URL table: base URL, path, query, and the URL expected (`nil`: refused).
  struct URLCase: Sendable, CustomTestStringConvertible {
    let base: String
    let path: String
    var query: [URLQueryItem] = []
    let expected: String?

    var testDescription: String { "\(base) + \(path)\(query.isEmpty ? "" : " ?\(query)")" }
  }

  static let urlCases: [URLCase] = [
    URLCase(base: "http://h/api/v1", path: "stream/config", expected: "http://h/api/v1/stream/config"),
    URLCase(base: "http://h/api/v1/", path: "stream/config", expected: "http://h/api/v1/stream/config"),
    URLCase(base: "http://h/api/", path: "/leading", expected: "http://h/api/leading"),
    URLCase(base: "http://h", path: "x", expected: "http://h/x"),
    URLCase(base: "http://h/api?key=1#top", path: "x", expected: "http://h/api/x"),
    URLCase(base: "http://h/", path: "https://other:8443/abs", expected: "https://other:8443/abs"),
    URLCase(
      base: "http://h/", path: "search", query: [URLQueryItem(name: "q", value: "a+b&c=d é")],
      expected: "http://h/search?q=a%2Bb%26c%3Dd%20%C3%A9"),
    URLCase(
      base: "http://h/", path: "x?page=2", query: [URLQueryItem(name: "flag", value: nil)],
      expected: "http://h/x?page=2&flag="),
    URLCase(
      base: "http://h/", path: "x",
      query: [URLQueryItem(name: "b", value: "2"), URLQueryItem(name: "a", value: "1")],
      expected: "http://h/x?b=2&a=1"),
    // An escape means the same whatever else the path holds (`URL(string:)` alone re-escaped
    // every `%` of a string it had to fix: `a%2Fb c` became `a%252Fb%20c`).
    URLCase(base: "http://h/", path: "a%2Fb", expected: "http://h/a%2Fb"),
    URLCase(base: "http://h/", path: "a%2Fb c", expected: "http://h/a%2Fb%20c"),
    URLCase(base: "http://h/", path: "a%2fb/ü", expected: "http://h/a%2fb/%C3%BC"),
    URLCase(
      base: "http://h/", path: "files/my report[1].pdf", expected: "http://h/files/my%20report%5B1%5D.pdf"),
    URLCase(base: "http://h/", path: "100%/50%zz", expected: "http://h/100%25/50%25zz"),
    URLCase(base: "http://h/", path: "x?q=a b&r=%26", expected: "http://h/x?q=a%20b&r=%26"),
    URLCase(base: "http://h/", path: "a+b;c=d@e:f!$'()*,~", expected: "http://h/a+b;c=d@e:f!$'()*,~"),
    URLCase(base: "http://h/", path: "https://[::1]:8443/a%2Fb c", expected: "https://[::1]:8443/a%2Fb%20c"),
    URLCase(base: "http://h/", path: "https://other/ü?x=é", expected: "https://other/%C3%BC?x=%C3%A9"),
  ]

  @Test(arguments: urlCases)
  func pathsAndQueriesMakeTheExpectedURL(_ row: URLCase) throws {
    let base = try #require(URL(string: row.base))
    let url = RequestBuilder.url(base: base, path: row.path, query: row.query)
    #expect(url?.absoluteString == row.expected)
  }

  /// One row of the refusal table: a request the builder must refuse, and a word of the reason.
  struct RefusalCase: Sendable, CustomTestStringConvertible {
    let base: String
    let request: HTTPRequest
    let reason: String

    var testDescription: String { "\(base) + \(request.path) → \(reason)" }
  }

  static let refusalCases: [RefusalCase] = [
    RefusalCase(base: "http://h/api/", request: HTTPRequest(path: "../admin"), reason: "'..' segment"),
    RefusalCase(base: "http://h/api/", request: HTTPRequest(path: "a/%2e/b"), reason: "'%2e' segment"),
    RefusalCase(base: "file:///tmp/", request: HTTPRequest(path: "x"), reason: "only http and https"),
    RefusalCase(
      base: "http://h/", request: HTTPRequest(path: "ftp://example.com/f"), reason: "only http and https"),
    RefusalCase(
      base: "http://h/", request: HTTPRequest(path: "x", headers: ["X-Bad": "a\r\nInjected: 1"]),
      reason: "control byte 0xd"),
    RefusalCase(
      base: "http://h/", request: HTTPRequest(path: "x", headers: ["Bad Name": "v"]),
      reason: "invalid byte 0x20"),
  ]

  @Test(arguments: refusalCases)
  func invalidRequestsAreRefusedWithTheReason(_ row: RefusalCase) throws {
    let builder = RequestBuilder(
      baseURL: try #require(URL(string: row.base)), defaultHeaders: [:], sensitiveHeaders: .defaultSensitive)
    guard case .failure(.invalidRequest(let reason)) = builder.urlRequest(for: row.request) else {
      Issue.record("\(row.request.path) was not refused")
      return
    }
    #expect(reason.contains(row.reason), "\(reason)")
  }

  @Test func aRefusedSensitiveValueIsRedactedInTheReason() throws {
    let builder = RequestBuilder(
      baseURL: try #require(URL(string: "http://h/")), defaultHeaders: [:],
      sensitiveHeaders: .defaultSensitive)
    let result = builder.urlRequest(for: HTTPRequest(path: "x", headers: ["Authorization": "s3cret\n"]))
    guard case .failure(.invalidRequest(let reason)) = result else {
      Issue.record("the header was not refused")
      return
    }
    #expect(!reason.contains("s3cret"))
  }

  @Test func requestHeadersOverrideDefaultsAndMethodAndBodyAreSet() throws {
    let builder = RequestBuilder(
      baseURL: try #require(URL(string: "http://h/")),
      defaultHeaders: ["X-App": "story", "Accept": "text/plain"], sensitiveHeaders: .defaultSensitive)
    let request = try builder.urlRequest(
      for: HTTPRequest(method: .put, path: "x", headers: ["accept": "application/json"], body: Data("b".utf8))
    ).get()
    #expect(request.httpMethod == "PUT")
    #expect(request.value(forHTTPHeaderField: "X-App") == "story")
    #expect(request.value(forHTTPHeaderField: "Accept") == "application/json")
    #expect(request.httpBody == Data("b".utf8))
  }

  @Test func sensitiveDefaultHeadersStayWithTheBaseURLsOrigin() throws {
    let builder = RequestBuilder(
      baseURL: try #require(URL(string: "http://h:8080/api/")),
      defaultHeaders: ["Authorization": "Bearer s3cret", "X-App": "story"],
      sensitiveHeaders: .defaultSensitive)
    let same = try builder.urlRequest(for: HTTPRequest(path: "http://h:8080/other")).get()
    #expect(same.value(forHTTPHeaderField: "Authorization") == "Bearer s3cret")
    for elsewhere in ["http://h:8081/x", "https://h:8080/x", "http://evil:8080/x"] {
      let request = try builder.urlRequest(for: HTTPRequest(path: elsewhere)).get()
      #expect(request.value(forHTTPHeaderField: "Authorization") == nil, "\(elsewhere)")
      #expect(request.value(forHTTPHeaderField: "X-App") == "story", "\(elsewhere)")
    }
    let ownCredential = try builder.urlRequest(
      for: HTTPRequest(path: "http://evil/x", headers: ["Authorization": "Bearer mine"])
    ).get()
    #expect(ownCredential.value(forHTTPHeaderField: "Authorization") == "Bearer mine")
  }

  @Test func percentEncodingKeepsOnlyTheGivenBytes() {
    #expect(PercentEncoding.encode("a-b._~", keeping: PercentEncoding.unreserved) == "a-b._~")
    #expect(PercentEncoding.encode("a=b&c", keeping: PercentEncoding.unreserved) == "a%3Db%26c")
    #expect(PercentEncoding.encode("a=b&c", keeping: PercentEncoding.pathSegment) == "a=b&c")
    #expect(PercentEncoding.encode("/?#", keeping: PercentEncoding.pathSegment) == "%2F%3F%23")
  }
}
