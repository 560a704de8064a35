import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Fresh random secrets, planted in every place a request or a response can carry one.
///
/// Each run draws new values, so a match in any text is a leak of this run, never a constant
/// that happens to appear somewhere.
private struct Secrets: Sendable {
  /// The secrets by where they were planted.
  let planted: [String: String]

  init() {
    let places = [
      "Authorization", "Cookie", "X-Session request header", "X-Session response header", "Set-Cookie",
      "access_token query", "X-Amz-Signature query", "user-info password", "JSON token", "JSON password",
      "form access_token", "Location token", "refused Location token", "loop token",
    ]
    var planted: [String: String] = [:]
    for place in places {
      planted[place] = "leak" + String(UInt64.random(in: 1 << 40...UInt64.max), radix: 36)
    }
    self.planted = planted
  }

  subscript(place: String) -> String { planted[place]! }

  /// The places whose secret `text` contains.
  func leaked(in text: String) -> [String] {
    planted.filter { text.contains($0.value) }.map(\.key).sorted()
  }
}

/// Every text collected from the errors, values, log lines and reports of one test.
private final class Texts: @unchecked Sendable {
  // Safety: `items` is read and written only while `lock` is held.
  private let lock = NSLock()
  private var items: [(source: String, text: String)] = []

  func add(_ source: String, _ text: String) {
    lock.lock()
    items.append((source, text))
    lock.unlock()
  }

  /// Adds every rendering of `value`: description, debug description, reflection, `dump`.
  func addRenderings(of value: Any, _ source: String) {
    var dumped = ""
    dump(value, to: &dumped)
    add("\(source) String(describing:)", String(describing: value))
    add("\(source) String(reflecting:)", String(reflecting: value))
    add("\(source) interpolation", "\(value)")
    add("\(source) dump", dumped)
    if let value = value as? any CustomStringConvertible { add("\(source) description", value.description) }
    if let value = value as? any CustomDebugStringConvertible {
      add("\(source) debugDescription", value.debugDescription)
    }
    if let error = value as? any Error {
      add("\(source) localizedDescription", error.localizedDescription)
      if let url = (error as? HTTPError)?.url { add("\(source) url", url.absoluteString) }
    }
  }

  var all: [(source: String, text: String)] {
    lock.lock()
    defer { lock.unlock() }
    return items
  }
}

/// Records the descriptions of the unhandled rejections of `errors`, reported as their promises
/// are dropped unobserved.
///
/// The handler is global: it is set, used and restored synchronously (a report is made on the
/// thread that releases the promise), and forwards to the previous handler.
private func reportUnhandled(_ errors: [any Error], into texts: Texts) {
  let previous = UnhandledRejection.handler
  UnhandledRejection.handler = { report in
    if report.error is HTTPError {
      texts.add("unhandled rejection", report.description)
    } else {
      previous?(report)
    }
  }
  defer { UnhandledRejection.handler = previous }
  @inline(never) func drop(_ error: any Error) { _ = Promise<Void>(error: error) }
  for error in errors { drop(error) }
}

@Suite("SecretLeak", .serialized, .timeLimit(.minutes(2)))
struct SecretLeakTests {
  /// A client of `server` with the secrets planted in its base URL's user-info, a custom
  /// sensitive header among its defaults and a logger whose lines are collected.
  private func client(
    of server: TestServer, _ secrets: Secrets, texts: Texts, base: URL? = nil,
    maximumResponseSize: Int = 1 << 20, redirectPolicy: RedirectPolicy = .default,
    timeout: Duration = .seconds(30), scheduler: any PromiseScheduler = PromiseSchedulers.default
  ) throws -> HTTPClient {
    var components = try #require(
      URLComponents(url: base ?? server.baseURL, resolvingAgainstBaseURL: false))
    components.user = "alice"
    components.password = secrets["user-info password"]
    let sensitive = HTTPClient.defaultSensitiveHeaders.union(["X-Session"])
    return HTTPClient(
      baseURL: try #require(components.url),
      configuration: .init(
        defaultHeaders: ["X-Session": secrets["X-Session request header"]], retryPolicy: .none,
        timeout: timeout, maximumResponseSize: maximumResponseSize, redirectPolicy: redirectPolicy,
        sensitiveHeaders: sensitive,
        interceptors: [HTTPLogger(sensitiveHeaders: sensitive) { texts.add("HTTPLogger", $0) }],
        scheduler: scheduler))
  }

  /// The request headers and query every request carries.
  private func planted(_ secrets: Secrets) -> (headers: [String: String], query: [URLQueryItem]) {
    (
      [
        "Authorization": "Bearer \(secrets["Authorization"])", "Cookie": "id=\(secrets["Cookie"])",
        "X-Trace": "visible-trace",
      ],
      [
        URLQueryItem(name: "access_token", value: secrets["access_token query"]),
        URLQueryItem(name: "X-Amz-Signature", value: secrets["X-Amz-Signature query"]),
        URLQueryItem(name: "page", value: "2"),
      ]
    )
  }

  private func routes(_ secrets: Secrets) -> (Router) -> Void {
    { router in
      let secretHeaders = [
        ("Set-Cookie", "session=\(secrets["Set-Cookie"]); Path=/"),
        ("X-Session", secrets["X-Session response header"]), ("X-Request-Id", "visible-request-id"),
      ]
      let json =
        #"{ "authenticated": true, "token": "\#(secrets["JSON token"])", "password": "\#(secrets["JSON password"])", "user": "visible-user" }"#
      router.on("GET", "/status") { _ in
        .respond(ServerResponse(status: 404, headers: secretHeaders, body: Array(json.utf8)))
      }
      router.on("GET", "/token") { _ in
        .respond(ServerResponse(status: 200, headers: secretHeaders, body: Array(json.utf8)))
      }
      let form = "access_token=\(secrets["form access_token"])&scope=visible-scope"
      let formHeaders = [("Content-Type", "application/x-www-form-urlencoded")]
      router.on("GET", "/form") { _ in
        .respond(ServerResponse(status: 400, headers: formHeaders, body: Array(form.utf8)))
      }
      router.on("GET", "/form-token") { _ in
        .respond(ServerResponse(status: 200, headers: formHeaders, body: Array(form.utf8)))
      }
      router.on("GET", "/broken") { _ in .closeImmediately }
      router.on("GET", "/slow") { _ in .slowHeaders(.text("late"), delay: .seconds(50)) }
      router.on("GET", "/big") { _ in .respond(.text(String(repeating: "x", count: 4096))) }
      router.on("GET", "/loop") { _ in
        .respond(.redirect(to: "/loop?token=\(secrets["loop token"])"))
      }
      router.on("GET", "/scheme") { _ in
        .respond(.redirect(to: "ftp://127.0.0.1/file?token=\(secrets["refused Location token"])"))
      }
      router.on("GET", "/landing") { _ in .respond(.text("gone", status: 410)) }
    }
  }

  /// Asserts that no text holds a secret, and names what leaked where.
  private func expectNoLeak(
    _ texts: Texts, _ secrets: Secrets, sourceLocation: SourceLocation = #_sourceLocation
  ) {
    var leaks: [String: Set<String>] = [:]
    for item in texts.all {
      for place in secrets.leaked(in: item.text) {
        leaks[place, default: []].insert(item.source.split(separator: " ").first.map(String.init) ?? "")
        Issue.record(
          "the \(place) secret leaked in \(item.source): \(item.text)", sourceLocation: sourceLocation)
      }
    }
    if !leaks.isEmpty {
      print(
        "LEAKS | "
          + leaks.sorted { $0.key < $1.key }.map { "\($0.key) ← \($0.value.sorted())" }.joined(
            separator: "; "))
    }
  }

  @Test func noErrorPathShowsAPlantedSecret() async throws {
    let secrets = Secrets()
    let texts = Texts()
    var errors: [any Error] = []
    try await withServer(routes(secrets)) { server in
      // A redirect to the second origin, with a token in its query.
      server.router.on("GET", "/away") { _ in
        .respond(.redirect(to: "\(server.server.secondBaseURL)landing?token=\(secrets["Location token"])"))
      }
      let client = try client(of: server, secrets, texts: texts, maximumResponseSize: 1024)
      let (headers, query) = planted(secrets)

      func run<T>(_ name: String, _ promise: Promise<T>) async {
        let (result, _) = await outcome(of: promise)
        switch result {
        case .success(let value):
          texts.addRenderings(of: value, name)
        case .failure(let error):
          errors.append(error)
          texts.addRenderings(of: error, name)
        }
      }
      // Bad status, with a JSON body and secret response headers.
      await run("status", client.get("status", query: query, headers: headers))
      // A decoding failure of a token response.
      struct Token: Decodable, Sendable { let token: Int }
      await run("decoding", client.get("token", query: query, headers: headers).decode(Token.self))
      // A form body, as a bad status and as a decoding failure.
      await run("form status", client.get("form", query: query, headers: headers))
      await run("form decoding", client.get("form-token", query: query, headers: headers).decode(Token.self))
      // A redirect to another origin with a token in its query, ending in a bad status.
      await run("redirect", client.get("away", query: query, headers: headers))
      // The same redirect not followed: the 3xx and its Location are the error.
      let notFollowing = try self.client(of: server, secrets, texts: texts, redirectPolicy: .doNotFollow)
      await run("redirect not followed", notFollowing.get("away", query: query, headers: headers))
      // Refused redirects: a loop (too many) and an unsupported scheme.
      await run("loop", client.get("loop", query: query, headers: headers))
      await run("scheme", client.get("scheme", query: query, headers: headers))
      // The server closes the connection; nothing listens.
      await run("closed", client.get("broken", query: query, headers: headers))
      let closed = try ClosedPort()
      let refused = try self.client(of: server, secrets, texts: texts, base: closed.baseURL)
      await run("refused", refused.get("x", query: query, headers: headers))
      withExtendedLifetime(closed) {}
      // Too large.
      await run("too large", client.get("big", query: query, headers: headers))
      // A timeout, on virtual time.
      let clock = VirtualTimeScheduler()
      let timing = try self.client(of: server, secrets, texts: texts, timeout: .seconds(20), scheduler: clock)
      let arrived = server.requests.count
      let slow = timing.get("slow", query: query, headers: headers)
      #expect(await server.arrived(arrived + 1))
      clock.advance(by: .seconds(20))
      await run("timeout", slow)
      // Cancellation.
      let cancelled = client.get("slow", query: query, headers: headers)
      cancelled.cancel()
      await run("cancel", cancelled)
      // Refused before sending: a control byte in a sensitive header, a URL of another scheme.
      await run(
        "invalid header",
        client.get(
          "status", query: query, headers: ["X-Session": "\(secrets["X-Session request header"])\r\nX: y"]))
      await run(
        "invalid URL",
        client.get("ftp://127.0.0.1/x?access_token=\(secrets["access_token query"])", headers: headers))
      // A success, and the values a user may print.
      await run("response", client.get("token", query: query, headers: headers))
      texts.addRenderings(of: client, "client")
      texts.addRenderings(
        of: HTTPRequest(path: "status", query: query, headers: HTTPHeaders(headers)), "request")
      #expect(await eventually { texts.all.contains { $0.source == "HTTPLogger" && $0.text.hasPrefix("✕") } })
    }
    reportUnhandled(errors, into: texts)
    #expect(texts.all.contains { $0.source == "unhandled rejection" })
    #expect(errors.count >= 13)
    expectNoLeak(texts, secrets)
    // Not everything is redacted: what is not secret is still there to read.
    let joined = texts.all.map(\.text).joined(separator: "\n")
    for visible in ["visible-user", "visible-scope", "page=2", "visible-request-id"] {
      #expect(joined.contains(visible), "\(visible)")
    }
  }

  /// httpbin's `/get` answers with the request's URL in its JSON (`"url": "http://…?access_token=…"`):
  /// a decoding error's excerpt of that body keeps no secret of the query, nor does any field.
  @Test func aDecodingErrorOfABodyEchoingTheURLShowsNoSecret() async throws {
    let secrets = Secrets()
    let texts = Texts()
    try await withServer({ router in
      router.on("GET", "/get") { request in
        let url = "http://\(request.host):\(request.port)\(request.path)"
        let escaped = url.replacingOccurrences(of: "/", with: "\\/")
        return .respond(
          .json(
            #"{"args": {}, "headers": {"Host": "\#(request.host)"}, "origin": "127.0.0.1", "url": "\#(url)", "#
              + #""escaped": "\#(escaped)"}"#))
      }
    }) { server in
      let client = try client(of: server, secrets, texts: texts)
      let query = [
        URLQueryItem(name: "page", value: "2"),
        URLQueryItem(name: "access_token", value: secrets["access_token query"]),
        URLQueryItem(name: "X-Amz-Signature", value: secrets["X-Amz-Signature query"]),
      ]
      struct Echo: Decodable, Sendable { let status: Int }
      let (result, _) = await outcome(of: client.get("get", query: query).decode(Echo.self))
      let error = try #require(httpError(result))
      guard case .decoding(let type, let path, let detail, let excerpt, let url) = error else {
        Issue.record("expected a decoding error, got \(error)")
        return
      }
      texts.addRenderings(of: error, "decoding")
      for (field, text) in [
        ("type", type), ("codingPath", path), ("detail", detail), ("bodyExcerpt", excerpt),
        ("url", url.absoluteString),
      ] {
        texts.add("decoding field \(field)", text)
      }
      // The secret was there to leak: the body carries it, twice.
      let body = try await client.get("get", query: query).value.text
      #expect(body.contains(secrets["access_token query"]))
      #expect(excerpt.contains("access_token=<redacted>&X-Amz-Signature=<redacted>"), "\(excerpt)")
      #expect(excerpt.contains("page=2"), "\(excerpt)")
    }
    expectNoLeak(texts, secrets)
  }
}
