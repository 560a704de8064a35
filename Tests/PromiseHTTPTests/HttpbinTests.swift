import Foundation
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The client against a server the project did not write: httpbin under gunicorn, started by
/// the tests (`HttpbinServer`). Three of these cases found bugs the loopback server's tests had
/// not: a redirect's lost body, a path escape that changed meaning, an unreadable header.
///
/// Runs only with `PROMISEHTTP_HTTPBIN=1` and where python3 can import httpbin and gunicorn:
/// `.ci/run` installs both and runs this suite in a step of its own, apart from the timing tests
/// (two CI runs stalled while it ran beside them; the cause was not pinned down).
@Suite(
  "httpbin under gunicorn", .timeLimit(.minutes(2)),
  .enabled("runs with PROMISEHTTP_HTTPBIN=1 where python3 has httpbin and gunicorn (pip install)") {
    await HttpbinServer.isAvailable()
  })
struct HttpbinTests {
  /// What httpbin's `/anything` echoes of a request.
  struct Echo: Decodable, Sendable {
    let method: String
    let url: String
    let args: [String: String]
    let data: String
    let headers: [String: String]
    let json: [String: Int]?
  }

  /// The socket transport and `URLSession`.
  static let engines: [HTTPClient.Engine] = [.automatic, .urlSession]

  private func client(
    retryPolicy: RetryPolicy = .none, maximumResponseSize: Int = 1 << 20,
    engine: HTTPClient.Engine = .automatic
  ) async throws -> HTTPClient {
    _ = loopbackBypassesProxy
    let server = try await offThePool { HttpbinServer.shared }.get()
    var configuration = HTTPClient.Configuration(
      retryPolicy: retryPolicy, maximumResponseSize: maximumResponseSize)
    configuration.engine = engine
    return HTTPClient(baseURL: server.baseURL, configuration: configuration)
  }

  @Test func queryItemsArriveAsTheyWereGiven() async throws {
    let client = try await client()
    let echo = try await client.get(
      "anything",
      query: [URLQueryItem(name: "a b", value: "c&d=é+f"), URLQueryItem(name: "empty", value: nil)]
    ).decode(Echo.self).value
    #expect(echo.method == "GET")
    #expect(echo.args == ["a b": "c&d=é+f", "empty": ""])
  }

  @Test func jsonIsSentAndAnswered() async throws {
    let client = try await client()
    let echo = try await client.post("anything", json: ["x": 1]).validate().decode(Echo.self).value
    #expect(echo.json == ["x": 1])
    #expect(echo.headers["Content-Type"] == "application/json")
  }

  @Test(arguments: [307, 308])
  func aRedirectThatKeepsTheMethodKeepsTheBody(status: Int) async throws {
    let client = try await client()
    let echo = try await client.put(
      "redirect-to",
      query: [
        URLQueryItem(name: "url", value: "/anything"), URLQueryItem(name: "status_code", value: "\(status)"),
      ],
      json: ["k": 1]
    ).decode(Echo.self).value
    #expect(echo.method == "PUT")
    #expect(echo.json == ["k": 1])
  }

  @Test func aSeeOtherRedirectIsAGetWithoutTheBodysFields() async throws {
    let client = try await client()
    let echo = try await client.post(
      "redirect-to",
      query: [
        URLQueryItem(name: "url", value: "/anything"), URLQueryItem(name: "status_code", value: "303"),
      ],
      headers: ["Content-Type": "text/plain"], body: Data("hi".utf8)
    ).decode(Echo.self).value
    #expect(echo.method == "GET")
    #expect(echo.data == "")
    #expect(echo.headers["Content-Type"] == nil)
  }

  @Test func tooManyRedirectsIsTyped() async throws {
    let client = try await client()
    let (result, _) = await outcome(of: client.get("redirect/11"))
    guard case .tooManyRedirects(let limit, _)? = httpError(result) else {
      Issue.record("expected tooManyRedirects, got \(result)")
      return
    }
    #expect(limit == HTTPClient.defaultMaximumRedirects)
  }

  @Test(arguments: ["gzip", "deflate", "brotli"], engines)
  func compressedBodiesArriveInflated(encoding: String, engine: HTTPClient.Engine) async throws {
    let client = try await client(engine: engine)
    let response = try await client.get(encoding).value
    struct Flag: Decodable { let gzipped: Bool?, deflated: Bool?, brotli: Bool? }
    let flag = try JSONDecoder().decode(Flag.self, from: response.body)
    #expect(flag.gzipped == true || flag.deflated == true || flag.brotli == true, "\(response.text)")
  }

  @Test func aChunkedStreamArrivesWhole() async throws {
    let client = try await client()
    let response = try await client.get("stream/25").value
    #expect(response.text.split(separator: "\n").count == 25)
  }

  @Test func aPathEscapeMeansTheSameNextToCharactersThatNeedEscaping() async throws {
    let client = try await client()
    let response = try await client.get("anything/a%2Fb/ü x").value
    #expect(response.url.absoluteString.hasSuffix("/anything/a%2Fb/%C3%BC%20x"), "\(response.url)")
    // gunicorn decodes the path once: an escape sent twice over (`%252F`) would echo as `%2F`.
    let echo = try JSONDecoder().decode(Echo.self, from: response.body)
    #expect(echo.url.contains("/anything/a/b/"), "\(echo.url)")
  }

  @Test(arguments: engines)
  func aHeaderInISO88591IsReadAsSuchOrIsAParseFailureThatSaysSo(engine: HTTPClient.Engine) async throws {
    // gunicorn writes header values in ISO-8859-1; FoundationNetworking reads only UTF-8, the
    // socket transport reads a value that is not UTF-8 as ISO-8859-1.
    let client = try await client(engine: engine)
    let (result, _) = await outcome(
      of: client.get("response-headers", query: [URLQueryItem(name: "X-Name", value: "é")]))
    if engine == .automatic && socketTransportServesLoopback {
      #expect(try result.get().headers["X-Name"] == "é")
      return
    }
    guard case .transport(let urlError, _)? = httpError(result) else {
      Issue.record("expected a transport failure, got \(result)")
      return
    }
    #expect(urlError.code == .cannotParseResponse)
    #expect(urlError.localizedDescription.contains("accepts only UTF-8"), "\(urlError.localizedDescription)")
  }

  @Test func aStatusOutsideTheAcceptedRangeCarriesItsBody() async throws {
    let client = try await client()
    let (result, _) = await outcome(of: client.get("status/418"))
    guard case .unacceptableStatus(let status, _, let excerpt, _)? = httpError(result) else {
      Issue.record("expected unacceptableStatus, got \(result)")
      return
    }
    #expect(status == 418)
    #expect(excerpt.contains("teapot"))
  }

  @Test func aServerErrorIsRetriedThenReported() async throws {
    let client = try await client(retryPolicy: quickRetries(3))
    let (result, _) = await outcome(of: client.get("status/503"))
    #expect(httpError(result)?.statusCode == 503)
  }

  @Test func aBodyOverTheLimitIsTooLarge() async throws {
    let client = try await client(maximumResponseSize: 100_000)
    let (result, _) = await outcome(
      of: client.get(
        "drip",
        query: [URLQueryItem(name: "duration", value: "0"), URLQueryItem(name: "numbytes", value: "200000")]))
    guard case .tooLarge(let limit, _)? = httpError(result) else {
      Issue.record("expected tooLarge, got \(result)")
      return
    }
    #expect(limit == 100_000)
  }

  @Test func aDeadlineEndsASlowResponse() async throws {
    let client = try await client()
    let start = ContinuousClock.now
    let (result, elapsed) = await outcome(
      of: client.get("delay/10", deadline: .after(.milliseconds(500))), since: start)
    guard case .timedOut? = httpError(result) else {
      Issue.record("expected timedOut, got \(result)")
      return
    }
    #expect(elapsed < .seconds(5))
  }

  @Test func cancellingEndsASlowResponse() async throws {
    let client = try await client()
    let promise = client.get("delay/10")
    let start = ContinuousClock.now
    promise.cancel()
    let (result, elapsed) = await outcome(of: promise, since: start)
    #expect(throws: CancellationError.self) { try result.get() }
    #expect(elapsed < .seconds(5))
  }

  @Test func badJSONIsADecodingError() async throws {
    let client = try await client()
    let (result, _) = await outcome(of: client.get("html").decode(Echo.self))
    guard case .decoding(let type, _, _, let excerpt, _)? = httpError(result) else {
      Issue.record("expected decoding, got \(result)")
      return
    }
    #expect(type == "Echo")
    #expect(excerpt.contains("<!DOCTYPE html>"))
  }

  @Test func aDecodingErrorOfAnEchoedURLCarriesNoSecret() async throws {
    // httpbin's /get echoes the request's URL in its JSON ("url": "http://…?access_token=…"):
    // the body excerpt of the decoding error must not carry the token.
    struct Wrong: Decodable, Sendable { let missing: Int }
    let client = try await client()
    let secret = "s3cr3t-token-value"
    let (result, _) = await outcome(
      of: client.get(
        "get",
        query: [URLQueryItem(name: "access_token", value: secret), URLQueryItem(name: "page", value: "2")]
      ).decode(Wrong.self))
    guard let error = httpError(result), case .decoding(_, _, _, let excerpt, _) = error else {
      Issue.record("expected decoding, got \(result)")
      return
    }
    #expect(excerpt.contains("page=2"), "the excerpt still shows the URL: \(excerpt)")
    for rendering in [excerpt, "\(error)", String(reflecting: error), error.localizedDescription] {
      #expect(!rendering.contains(secret), "\(rendering)")
    }
  }

  @Test func fiftyConcurrentRequestsAllArrive() async throws {
    let client = try await client()
    let responses = try await Promise.all((0..<50).map { client.get("anything/\($0)").decode(Echo.self) })
      .value
    #expect(
      responses.map(\.url) == (0..<50).map { "http://127.0.0.1:\(responses[0].url.port)/anything/\($0)" })
  }

  /// What httpbin's `/post` echoes of a form.
  struct FormEcho: Decodable, Sendable {
    let form: [String: String]
    let files: [String: String]
    let headers: [String: String]
  }

  @Test func aMultipartFormWithAFileFromDiskArrivesWhole() async throws {
    let client = try await client()
    let scratch = try UploadTests.Scratch()
    defer { scratch.remove() }
    let text = String(repeating: "line of the report\r\n", count: 5000)
    var form = MultipartForm()
    form.append("Ada Lovelace", name: "author")
    form.append("", name: "empty")
    form.append("ünïcödé", name: "note")
    form.append(
      fileAt: try scratch.file("report.txt", Data(text.utf8)), name: "report", contentType: "text/plain")
    form.append(Data("{\"a\":1}".utf8), name: "meta", fileName: "meta.json", contentType: "application/json")
    let echo = try await client.upload(.multipart(form), to: "post").decode(FormEcho.self).value
    #expect(echo.form == ["author": "Ada Lovelace", "empty": "", "note": "ünïcödé"])
    #expect(echo.files == ["report": text, "meta": "{\"a\":1}"])
    #expect(echo.headers["Content-Type"] == form.contentType)
  }

  @Test func aFileArrivesWithItsLength() async throws {
    let client = try await client()
    let scratch = try UploadTests.Scratch()
    defer { scratch.remove() }
    let text = String(repeating: "0123456789", count: 10_000)
    let url = try scratch.file("digits.txt", Data(text.utf8))
    let echo = try await client.upload(
      .file(url), to: "anything", method: .put, headers: ["Content-Type": "text/plain"]
    )
    .decode(Echo.self).value
    #expect(echo.method == "PUT")
    #expect(echo.data == text)
    #expect(echo.headers["Content-Length"] == "100000")
  }
}

extension String {
  /// The port of a URL string, for the echo's `url` field.
  fileprivate var port: Int { URL(string: self)?.port ?? 0 }
}
