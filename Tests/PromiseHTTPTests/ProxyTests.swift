import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The socket transport through an `http://` proxy of the environment (`http_proxy`,
/// `https_proxy`): plain HTTP forwarded with its absolute URL, HTTPS through a `CONNECT`
/// tunnel with TLS end to end, the proxy's credentials, its refusals as typed errors, and
/// `no_proxy`. Against a python3 proxy the tests control, and against tinyproxy (a proxy we did
/// not write) where it is installed, with curl through the same proxy in the same run.
///
/// The proxy variables are given to each client (`Configuration.proxyEnvironment`), not set in
/// the process, where they would reach every test running beside these.
@Suite(
  "Proxies", .timeLimit(.minutes(1)),
  .enabled(if: TLSTools.available, "needs openssl and python3 on PATH"),
  .enabled(if: socketTransportServesLoopback, "a proxy in the environment sends requests through URLSession"))
struct ProxyTests {
  /// A proxy on 127.0.0.1: `CONNECT host:port` opens a tunnel (piped both ways); any other
  /// request must have an absolute `http://` target and is forwarded to that origin with an
  /// origin-form target, then the connection is piped. It prints one line per request it gets:
  /// "connect AUTHORITY | AUTHORIZATION" or "forward TARGET | AUTHORIZATION". With an argument
  /// `user:password` it answers 407 to requests without those Basic credentials; with `refuse`,
  /// it answers every CONNECT with 403.
  static let script = """
    import base64, os, socket, sys, threading
    \(TLSServer.lockedPrint)
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    expected = ("Basic " + base64.b64encode(mode.encode()).decode()) if ":" in mode else None
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    connections = 0
    def control():
        while sys.stdin.readline():
            print("connections", connections)
        os._exit(0)
    threading.Thread(target=control, daemon=True).start()
    def pipe(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
    def serve(client):
        try:
            client.settimeout(30)
            head = b""
            while b"\\r\\n\\r\\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    return
                head += chunk
            head, rest = head.split(b"\\r\\n\\r\\n", 1)
            lines = head.split(b"\\r\\n")
            method, target, version = lines[0].decode("latin-1").split(" ")
            fields = dict((l.split(b":", 1)[0].strip().lower(), l.split(b":", 1)[1].strip().decode("latin-1")) for l in lines[1:])
            authorization = fields.get(b"proxy-authorization", "")
            print("connect" if method == "CONNECT" else "forward", target, "|", authorization)
            if expected is not None and authorization != expected:
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\\r\\nProxy-Authenticate: Basic realm=\\"test\\"\\r\\nContent-Length: 0\\r\\n\\r\\n")
                return
            if method == "CONNECT":
                if mode == "refuse":
                    client.sendall(b"HTTP/1.1 403 Forbidden\\r\\nContent-Length: 0\\r\\n\\r\\n")
                    return
                host, port = target.rsplit(":", 1)
                upstream = socket.create_connection((host.strip("[]"), int(port)))
                client.sendall(b"HTTP/1.1 200 Connection established\\r\\n\\r\\n")
                upstream.sendall(rest)
            else:
                assert target.startswith("http://"), target
                authority, _, path = target[len("http://"):].partition("/")
                host, _, port = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "80")
                upstream = socket.create_connection((host, int(port)))
                kept = [l for l in lines[1:] if not l.lower().startswith(b"proxy-authorization:")]
                upstream.sendall(("%s /%s %s\\r\\n" % (method, path, version)).encode("latin-1") + b"\\r\\n".join(kept) + b"\\r\\n\\r\\n" + rest)
            threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
            pipe(client, upstream)
        except (OSError, ValueError, AssertionError) as error:
            print("failed", error)
        finally:
            client.close()
    print("port", listener.getsockname()[1])
    while True:
        client, _ = listener.accept()
        connections += 1
        threading.Thread(target=serve, args=(client,), daemon=True).start()
    """

  /// A running test proxy.
  final class TestProxy: Sendable {
    let port: Int
    private let process: ChildProcess
    let output: Lines

    init(mode: String) throws {
      let (process, output) = try PythonProcess.start(
        script: ProxyTests.script, arguments: mode.isEmpty ? [] : [mode])
      self.process = process
      self.output = output
      guard let line = output.first(from: 0, withPrefix: "port ", timeout: .seconds(30)),
        let port = Int(line.dropFirst("port ".count))
      else {
        process.closeStandardInput()
        throw TLSFixtureError(description: "the proxy did not start: \(output.all)")
      }
      self.port = port
    }

    /// The request lines it printed ("connect …", "forward …"), waiting for `count` of them
    /// (at most 10 s: the pipe that brings them may lag behind the response).
    func requests(expecting count: Int) -> [String] {
      let deadline = Date().addingTimeInterval(10)
      while true {
        let lines = output.all.filter { $0.hasPrefix("connect ") || $0.hasPrefix("forward ") }
        if lines.count >= count || Date() > deadline { return lines }
        usleep(10_000)
      }
    }

    func stop() {
      process.closeStandardInput()
      process.terminate(grace: .seconds(5))
    }
  }

  private func withProxy<T>(mode: String = "", _ body: (TestProxy) async throws -> T) async throws -> T {
    _ = loopbackBypassesProxy
    let proxy = try await offThePool { Result { try TestProxy(mode: mode) } }.get()
    defer { proxy.stop() }
    return try await body(proxy)
  }

  /// A `TLSServer` with a new self-signed certificate for 127.0.0.1, and the certificate's PEM.
  private func withTLSServerAndCertificate<T>(_ body: (TLSServer, Data) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "ProxyTests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let (server, pem) = try await offThePool {
      Result {
        let certificate = try TestCertificate.make(
          commonName: "localhost", alternativeNames: "DNS:localhost,IP:127.0.0.1", in: directory)
        return (try TLSServer(serving: certificate), try Data(contentsOf: certificate.certificate))
      }
    }.get()
    defer { server.stop() }
    return try await body(server, pem)
  }

  private func configuration(
    proxyEnvironment: [String: String], trusting certificate: Data? = nil
  ) -> HTTPClient.Configuration {
    var configuration = HTTPClient.Configuration(retryPolicy: .none)
    configuration.proxyEnvironment = proxyEnvironment
    if let certificate { configuration.serverTrust = .init(additionalCertificates: [certificate]) }
    return configuration
  }

  @Test func plainHTTPIsForwardedWithItsAbsoluteURLAndTheProxysCredentials() async throws {
    try await withProxy(mode: "ada:s3cret") { proxy in
      try await withServer({ router in
        router.on("GET", "/config") { _ in .respond(.text("through the proxy")) }
      }) { server async throws in
        let client = HTTPClient(
          baseURL: server.baseURL,
          configuration: configuration(proxyEnvironment: [
            "http_proxy": "http://ada:s3cret@127.0.0.1:\(proxy.port)"
          ]))
        let response = try await client.get("config", query: [URLQueryItem(name: "a", value: "1")]).value
        #expect(response.statusCode == 200 && response.text == "through the proxy")
        let requests = await offThePool { proxy.requests(expecting: 1) }
        let credentials = "Basic " + Data("ada:s3cret".utf8).base64EncodedString()
        #expect(requests == ["forward \(server.baseURL.absoluteString)config?a=1 | \(credentials)"])
        let received = try #require(server.requests.last)
        #expect(received.header("Proxy-Authorization") == nil, "the proxy keeps its credentials")
        #expect(received.header("User-Agent") == "PromiseHTTP", "over the socket transport")
      }
    }
  }

  @Test func httpsGoesThroughATunnelWithTLSEndToEnd() async throws {
    try await withProxy { proxy in
      try await withTLSServerAndCertificate { server, certificate in
        let client = HTTPClient(
          baseURL: server.baseURL(),
          configuration: configuration(
            proxyEnvironment: ["https_proxy": "127.0.0.1:\(proxy.port)"], trusting: certificate))
        let response = try await client.get("over/the/tunnel").value
        #expect(response.statusCode == 200 && response.text == "hello over TLS")
        let requests = await offThePool { proxy.requests(expecting: 1) }
        #expect(requests == ["connect 127.0.0.1:\(server.port) | "], "a CONNECT, no credentials")
        // The server prints before it answers, but its output reaches us through a pipe read on
        // another thread, which may be behind the answer.
        #expect(
          await eventually { server.log.contains("request GET /over/the/tunnel HTTP/1.1") },
          "\(server.log)")
      }
    }
  }

  @Test func aProxyThatWantsCredentialsIsNamedAndNotRetried() async throws {
    try await withProxy(mode: "ada:s3cret") { proxy in
      try await withTLSServerAndCertificate { server, certificate in
        var configuration = configuration(
          proxyEnvironment: ["https_proxy": "http://127.0.0.1:\(proxy.port)"],
          trusting: certificate)
        configuration.retryPolicy = quickRetries(3)
        let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration)
        let error = try transportError(await outcome(of: client.get("secret")).result)
        #expect(error.code == .userAuthenticationRequired)
        #expect(
          error.localizedDescription
            == "CONNECT tunnel failed, response 407 (proxy 127.0.0.1:\(proxy.port), tunnel to 127.0.0.1:\(server.port))"
        )
        #expect(await offThePool { proxy.requests(expecting: 1) }.count == 1)
      }
    }
  }

  @Test func aRefusedTunnelIsATypedErrorAndNothingReachesTheServer() async throws {
    try await withProxy(mode: "refuse") { proxy in
      try await withTLSServerAndCertificate { server, certificate in
        let client = HTTPClient(
          baseURL: server.baseURL(),
          configuration: configuration(
            proxyEnvironment: ["all_proxy": "http://127.0.0.1:\(proxy.port)"],
            trusting: certificate))
        let error = try transportError(await outcome(of: client.get("secret")).result)
        #expect(error.code == .cannotConnectToHost)
        #expect(error.localizedDescription.hasPrefix("CONNECT tunnel failed, response 403"))
        #expect(try await offThePool { Result { try server.connections() } }.get() == 0)
      }
    }
  }

  @Test func noProxyExemptsAHost() async throws {
    try await withProxy { proxy in
      try await withServer({ router in
        router.on("GET", "/direct") { _ in .respond(.text("direct")) }
      }) { server async throws in
        let client = HTTPClient(
          baseURL: server.baseURL,
          configuration: configuration(proxyEnvironment: [
            "http_proxy": "http://127.0.0.1:\(proxy.port)", "no_proxy": "localhost,127.0.0.1",
          ]))
        #expect(try await client.get("direct").value.text == "direct")
        #expect(proxy.output.all.allSatisfy { !$0.hasPrefix("forward") && !$0.hasPrefix("connect") })
      }
    }
  }
}

/// The `URLError` of a rejected outcome's `HTTPError.transport`.
func transportError<T>(
  _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
) throws -> URLError {
  let error = try #require(httpError(result, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
  guard case .transport(let urlError, _) = error else {
    throw TLSFixtureError(description: "expected a transport error, got \(error)")
  }
  return urlError
}
