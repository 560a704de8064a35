import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The socket transport against nginx 1.22 (`NginxServer`), over plain HTTP and over HTTPS:
/// keep-alive as nginx ends it (after its 1,000th request on a connection, after an idle
/// timeout, on every answer), gzipped and chunked bodies, answers without a body on a kept
/// connection, and large transfers both ways checked byte for byte, with curl fetching the same
/// file in the same run. nginx's access log says which requests shared a connection.
///
/// Runs where nginx, openssl and python3 are on PATH (`.ci/run` installs nginx); skipped
/// elsewhere.
@Suite(
  "nginx", .timeLimit(.minutes(2)),
  .enabled(if: NginxServer.isAvailable, "needs nginx (apt-get install nginx), openssl and python3 on PATH"),
  .enabled(if: socketTransportServesLoopback, "a proxy in the environment sends requests through URLSession"))
struct NginxTests {
  /// Plain HTTP, and HTTPS where OpenSSL 3 loads.
  static let overTLS: [Bool] = [false] + (OpenSSL.loaded != nil ? [true] : [])

  /// How a case reaches nginx: the engine, in plain HTTP or over TLS.
  struct Route: Sendable, CustomTestStringConvertible {
    let engine: HTTPClient.Engine
    let overTLS: Bool

    var testDescription: String { "\(engine)" + (overTLS ? " over TLS" : "") }
  }

  /// The socket transport over `overTLS`, and `URLSession` in plain HTTP (it cannot trust the
  /// tests' authority on Linux: `HttpbinTests.routes` says why).
  static let routes: [Route] =
    overTLS.map { Route(engine: .automatic, overTLS: $0) } + [Route(engine: .urlSession, overTLS: false)]

  private func server() async throws -> NginxServer {
    _ = loopbackBypassesProxy
    return try await offThePool { NginxServer.shared }.get()
  }

  private func client(
    _ server: NginxServer, overTLS: Bool, engine: HTTPClient.Engine = .automatic,
    maximumResponseSize: Int = 1 << 20
  ) -> HTTPClient {
    var configuration = HTTPClient.Configuration(retryPolicy: .none, maximumResponseSize: maximumResponseSize)
    configuration.engine = engine
    configuration.serverTrust = .init(additionalCertificates: [server.authority])
    return HTTPClient(baseURL: server.baseURL(overTLS: overTLS), configuration: configuration)
  }

  private static func tag() -> String { UUID().uuidString }

  /// Fetches `pathAndQuery` from `server` with curl into `file`, trusting the server's
  /// authority, with `arguments` (how to reach it: directly, or through a proxy).
  private func curl(
    _ server: NginxServer, overTLS: Bool, _ pathAndQuery: String, to file: URL, _ arguments: [String],
    sourceLocation: SourceLocation = #_sourceLocation
  ) async throws {
    let url = server.baseURL(overTLS: overTLS).absoluteString + pathAndQuery
    let all = ["-sS", "--cacert", server.authorityFile.path, "-o", file.path] + arguments + [url]
    let outcome = try await offThePool {
      Result { try ChildProcess.run("/usr/bin/curl", all, mergingStandardError: true, timeout: .seconds(60)) }
    }.get()
    #expect(outcome.isSuccess, "curl: \(outcome.standardOutputText)", sourceLocation: sourceLocation)
  }

  /// nginx closes a connection after its 1,000th request (`keepalive_requests`, saying
  /// `Connection: close` on that answer): a thousand `get`s go over one connection, and the
  /// next one over a new connection, without an error.
  @Test(arguments: overTLS)
  func aThousandGetsShareOneConnectionAndTheNextOpensAnother(overTLS: Bool) async throws {
    let server = try await server()
    let client = client(server, overTLS: overTLS)
    let tag = Self.tag()
    for index in 1...1_001 {
      let response = try await client.get("small.txt", query: [URLQueryItem(name: "t", value: tag)]).value
      #expect(response.statusCode == 200 && response.text == NginxServer.smallBody, "request \(index)")
    }
    let lines = await server.log(tagged: tag, count: 1_001)
    try #require(lines.count == 1_001, "\(lines.suffix(3))")
    #expect(Set(lines.prefix(1_000).map(\.connection)).count == 1, "the first 1,000 on one connection")
    #expect(lines.prefix(1_000).map(\.requestOnConnection) == Array(1...1_000))
    #expect(lines[1_000].connection != lines[0].connection && lines[1_000].requestOnConnection == 1)
  }

  /// nginx gzips JSON (`gzip on`) and so sends it chunked: the body arrives decoded, whole, and
  /// the connection is kept for the next request.
  @Test(arguments: routes)
  func aGzippedChunkedBodyIsDecodedAndTheConnectionKept(route: Route) async throws {
    let server = try await server()
    let client = client(server, overTLS: route.overTLS, engine: route.engine)
    let tag = Self.tag()
    let query = [URLQueryItem(name: "t", value: tag)]
    for _ in 0..<2 {
      let response = try await client.get("data.json", query: query).value
      #expect(response.statusCode == 200)
      #expect(response.headers["Content-Encoding"] == "gzip")
      #expect(response.headers["Transfer-Encoding"] == "chunked")
      #expect(response.body == NginxServer.json, "decoded: \(response.body.count) bytes")
    }
    let lines = await server.log(tagged: tag, count: 2)
    #expect(lines.count == 2 && lines[0].connection == lines[1].connection, "\(lines)")
  }

  /// Answers without a body (a 304 to `If-None-Match`, an answer to `HEAD` that states a
  /// `Content-Length`) end where their head ends: the same connection carries the next request,
  /// whose answer is its own.
  @Test(arguments: routes)
  func answersWithoutABodyKeepTheConnection(route: Route) async throws {
    let server = try await server()
    var configuration = client(server, overTLS: route.overTLS, engine: route.engine).configuration
    configuration.acceptableStatusCodes = 200..<400  // a 304 is an answer here, not a failure
    let client = HTTPClient(baseURL: server.baseURL(overTLS: route.overTLS), configuration: configuration)
    let tag = Self.tag()
    let query = [URLQueryItem(name: "t", value: tag)]
    let first = try await client.get("small.txt", query: query).value
    let etag = try #require(first.headers["ETag"])
    let notModified = try await client.get("small.txt", query: query, headers: ["If-None-Match": etag]).value
    #expect(notModified.statusCode == 304 && notModified.body.isEmpty)
    let head = try await client.head("big.bin", query: query).value
    #expect(head.statusCode == 200 && head.body.isEmpty)
    #expect(head.headers["Content-Length"] == "\(NginxServer.bigSize)")
    let last = try await client.get("small.txt", query: query).value
    #expect(last.statusCode == 200 && last.text == NginxServer.smallBody)
    let lines = await server.log(tagged: tag, count: 4)
    #expect(lines.map(\.status) == [200, 304, 200, 200])
    #expect(Set(lines.map(\.connection)).count == 1, "one connection: \(lines)")
  }

  /// nginx closes a connection idle for a second (`keepalive_timeout 1s` on `/short/`, with no
  /// `Keep-Alive` field that would tell the client): a request after two and a half seconds
  /// finds the connection closed and goes over a new one, without an error.
  @Test(arguments: overTLS)
  func aConnectionTheServerClosedWhileIdleIsNotAnError(overTLS: Bool) async throws {
    let server = try await server()
    let client = client(server, overTLS: overTLS)
    let tag = Self.tag()
    let query = [URLQueryItem(name: "t", value: tag)]
    let first = try await client.get("short/small.txt", query: query).value
    #expect(first.headers["Keep-Alive"] == nil)
    // The scenario is the wait itself: longer than nginx keeps the connection, by 1.5 s.
    try await Task.sleep(for: .milliseconds(2_500))
    let second = try await client.get("short/small.txt", query: query).value
    #expect(second.statusCode == 200 && second.text == NginxServer.smallBody)
    let lines = await server.log(tagged: tag, count: 2)
    #expect(lines.count == 2 && lines[0].connection != lines[1].connection, "\(lines)")
  }

  /// nginx answers every request on `/close/` with `Connection: close` (`keepalive_timeout 0`):
  /// each request gets a connection of its own, and none fails.
  @Test(arguments: overTLS)
  func connectionCloseOnEveryAnswerGivesEachRequestItsOwnConnection(overTLS: Bool) async throws {
    let server = try await server()
    let client = client(server, overTLS: overTLS)
    let tag = Self.tag()
    for _ in 0..<5 {
      let response = try await client.get("close/small.txt", query: [URLQueryItem(name: "t", value: tag)])
        .value
      #expect(response.statusCode == 200 && response.headers["Connection"] == "close")
    }
    let lines = await server.log(tagged: tag, count: 5)
    #expect(Set(lines.map(\.connection)).count == 5, "\(lines)")
  }

  /// A 24 MiB download arrives byte for byte as nginx has it (`sendfile on`), as curl gets it in
  /// the same run; the same bytes uploaded with `PUT` (nginx's WebDAV module) are stored whole.
  @Test(arguments: routes)
  func aLargeDownloadAndUploadMatchTheServersFileAndCurls(route: Route) async throws {
    let server = try await server()
    let overTLS = route.overTLS
    let client = client(server, overTLS: overTLS, engine: route.engine)
    let tag = Self.tag()
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("NginxTests-\(tag)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }

    let ours = directory.appendingPathComponent("ours.bin")
    let download = try await client.download(
      "big.bin", to: ours, query: [URLQueryItem(name: "t", value: tag)]
    )
    .value
    #expect(download.response.statusCode == 200)
    let curls = directory.appendingPathComponent("curls.bin")
    try await curl(server, overTLS: overTLS, "big.bin?t=\(tag)", to: curls, ["--noproxy", "*"])
    let received = try Data(contentsOf: ours)
    #expect(received.count == NginxServer.bigSize)
    #expect(received == NginxServer.big, "byte for byte as nginx has it")
    #expect(received == (try Data(contentsOf: curls)), "as curl got it")

    let name = "upload/\(tag).bin"
    let uploaded = try await client.upload(.file(ours), to: name, method: .put).value
    #expect(uploaded.statusCode == 201)
    let stored = try Data(contentsOf: server.directory.appendingPathComponent("www/\(name)"))
    #expect(stored == NginxServer.big, "stored whole: \(stored.count) bytes")
    try? FileManager.default.removeItem(at: server.directory.appendingPathComponent("www/\(name)"))
  }

  /// nginx asks for a client certificate (`ssl_verify_client optional`) and `/mtls/` names the
  /// one it verified: the client's `clientCertificate` is presented and accepted; a client
  /// without one gets nginx's 403, over a handshake that still succeeds.
  @Test(.enabled(if: OpenSSL.loaded != nil, "needs OpenSSL 3 (libssl.so.3) to load"))
  func aClientCertificateIsPresentedToNginx() async throws {
    let server = try await server()
    var configuration = client(server, overTLS: true).configuration
    configuration.clientCertificate = HTTPClient.ClientCertificate(
      certificateChain: try Data(contentsOf: server.leafCertificate),
      privateKey: try Data(contentsOf: server.leafKey))
    let identified = HTTPClient(baseURL: server.baseURL(overTLS: true), configuration: configuration)
    let response = try await identified.get("mtls/whoami").value
    #expect(response.statusCode == 200 && response.text == "client CN=localhost\n", "\(response.text)")

    let anonymous = client(server, overTLS: true)
    let (result, _) = await outcome(of: anonymous.get("mtls/whoami"))
    guard case .unacceptableStatus(let status, _, let excerpt, _) = httpError(result) else {
      Issue.record("expected nginx's 403, got \(result)")
      return
    }
    #expect(
      status == 403
        && excerpt.trimmingCharacters(in: .whitespacesAndNewlines) == "no client certificate: NONE")
  }

  /// Through tinyproxy (a proxy we did not write), named as the environment would name it:
  /// plain HTTP forwarded, HTTPS through a `CONNECT` tunnel, a 24 MiB download byte for byte as
  /// nginx has it and as curl gets it through the same proxy in the same run; nginx sees the
  /// requests, tinyproxy carried them.
  @Test(
    .enabled(if: TinyproxyServer.executable != nil, "needs tinyproxy (apt-get install tinyproxy)"),
    arguments: overTLS)
  func throughTinyproxyAsCurlGoes(overTLS: Bool) async throws {
    let server = try await server()
    let proxy = try await offThePool { TinyproxyServer.shared }.get()
    let proxyURL = "http://127.0.0.1:\(proxy.port)"
    let small = try await expectTransfers(
      through: proxyURL, as: overTLS ? "https_proxy" : "http_proxy", from: server, overTLS: overTLS)
    if !overTLS { #expect(small.headers["Via"]?.contains("tinyproxy") == true, "forwarded by tinyproxy") }
  }

  /// Through microsocks (a SOCKS5 server we did not write), named as the environment would
  /// name it: plain HTTP and HTTPS in its tunnel, a 24 MiB download byte for byte as nginx has
  /// it and as curl gets it through the same proxy in the same run.
  @Test(
    .enabled(if: Microsocks.executable != nil, "needs microsocks (apt-get install microsocks)"),
    arguments: overTLS)
  func throughMicrosocksAsCurlGoes(overTLS: Bool) async throws {
    let server = try await server()
    try await Microsocks.with { socks in
      _ = try await expectTransfers(
        through: "socks5h://127.0.0.1:\(socks.port)", as: "all_proxy", from: server, overTLS: overTLS)
      // Every request went through microsocks: it opened the tunnels, to nginx's port.
      #expect(
        await socks.connected(to: "127.0.0.1:\(overTLS ? server.tlsPort : server.plainPort)"), "\(socks.log)")
    }
  }

  /// Through the proxy at `proxyURL`, named in the environment variable `variable`: the small
  /// file, then a 24 MiB download byte for byte as nginx has it and as curl gets it through the
  /// same proxy in the same run, and nginx's log of the three requests. Returns the small
  /// file's response.
  private func expectTransfers(
    through proxyURL: String, as variable: String, from server: NginxServer, overTLS: Bool
  ) async throws -> HTTPResponse {
    var configuration = client(server, overTLS: overTLS).configuration
    configuration.proxyEnvironment = [variable: proxyURL]
    let client = HTTPClient(baseURL: server.baseURL(overTLS: overTLS), configuration: configuration)
    let tag = Self.tag()
    let small = try await client.get("small.txt", query: [URLQueryItem(name: "t", value: tag)]).value
    #expect(small.statusCode == 200 && small.text == NginxServer.smallBody)
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("NginxTests-\(tag)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let ours = directory.appendingPathComponent("ours.bin")
    _ = try await client.download("big.bin", to: ours, query: [URLQueryItem(name: "t", value: tag)]).value
    let curls = directory.appendingPathComponent("curls.bin")
    try await curl(server, overTLS: overTLS, "big.bin?t=\(tag)", to: curls, ["--proxy", proxyURL])
    let received = try Data(contentsOf: ours)
    #expect(received == NginxServer.big, "byte for byte as nginx has it: \(received.count) bytes")
    #expect(received == (try Data(contentsOf: curls)), "as curl got it through the same proxy")
    let lines = await server.log(tagged: tag, count: 3)
    #expect(lines.count == 3 && lines.allSatisfy { $0.status == 200 }, "\(lines)")
    return small
  }
}
