import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The socket transport through a SOCKS5 proxy of the environment (`socks5h://`, `socks5://`),
/// against microsocks, a SOCKS5 server this project did not write (Debian's `microsocks`), with
/// curl through the same proxy in the same run as the reference. The proxy is given to each
/// client (`Configuration.proxyEnvironment`), not set in this process's environment.
@Suite(
  "SOCKS5 proxy (microsocks)", .timeLimit(.minutes(1)),
  .enabled(if: Microsocks.executable != nil, "needs microsocks (apt-get install microsocks)"),
  .enabled(if: socketTransportServesLoopback, "a proxy in the environment sends requests through URLSession"))
struct SOCKSTests {
  /// Whether `localhost` resolves to 127.0.0.1 first here, where the loopback servers listen
  /// (a proxy, or this process with `socks5://`, connects to the first address only).
  static let localhostIsIPv4First =
    (try? SocketConnection.addressBytes(resolving: "localhost", port: 80)) == [127, 0, 0, 1]

  /// A client of `server` at `host` through `proxy` (as `all_proxy`).
  private func client(_ server: TestServer, host: String = "127.0.0.1", proxy: String) -> HTTPClient {
    var configuration = HTTPClient.Configuration(retryPolicy: .none)
    configuration.proxyEnvironment = ["all_proxy": proxy]
    return HTTPClient(
      baseURL: URL(string: "http://\(host):\(server.server.port)/")!, configuration: configuration)
  }

  /// curl's exit status and output for `url` through `proxy`.
  private func curl(_ url: String, proxy: String) async throws -> (Int32, String) {
    let outcome = try await offThePool {
      // `-4`: curl resolves `localhost` itself, and may put ::1 first.
      Result {
        try ChildProcess.run("/usr/bin/curl", ["-sS", "-4", "-x", proxy, url], timeout: .seconds(60))
      }
    }.get()
    guard case .exited(let status) = outcome.termination else { return (-1, outcome.summary) }
    return (status, outcome.standardOutputText)
  }

  private var hasCurl: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") }

  @Test(
    .enabled(
      if: localhostIsIPv4First, "localhost resolves to ::1 first here; the loopback server is on 127.0.0.1"),
    arguments: [true, false])
  func plainHTTPGoesThroughATunnelWithTheNameResolvedWhereTheSchemeSays(proxyResolves: Bool) async throws {
    try await Microsocks.with { socks in
      try await withServer({ router in
        router.on("GET", "/config") { _ in .respond(.text("through socks")) }
      }) { server in
        let proxy = "\(proxyResolves ? "socks5h" : "socks5")://127.0.0.1:\(socks.port)"
        let response = try await client(server, host: "localhost", proxy: proxy).get("config").value
        #expect(response.statusCode == 200 && response.text == "through socks")
        let received = try #require(server.requests.last)
        #expect(received.path == "/config", "origin-form, as to the server itself")
        #expect(received.header("User-Agent") == "PromiseHTTP", "over the socket transport")
        // socks5h: the proxy got the name; socks5: the address this process resolved.
        let target = "\(proxyResolves ? "localhost" : "127.0.0.1"):\(server.server.port)"
        #expect(await socks.connected(to: target), "\(socks.log)")
        if hasCurl {
          let (status, text) = try await curl("http://localhost:\(server.server.port)/config", proxy: proxy)
          #expect(status == 0 && text == "through socks", "curl: \(status) \(text)")
        }
      }
    }
  }

  @Test func twoRequestsShareOneTunnel() async throws {
    try await Microsocks.with { socks in
      try await withServer({ router in
        router.on("GET", "/n") { _ in .respond(.text("n")) }
      }) { server in
        let client = client(server, proxy: "socks5h://127.0.0.1:\(socks.port)")
        _ = try await client.get("n").value
        _ = try await client.get("n").value
        #expect(server.requests.count == 2)
        #expect(Set(server.requests.map(\.connectionNumber)).count == 1, "kept alive")
        #expect(await socks.connected(to: "127.0.0.1:\(server.server.port)"), "\(socks.log)")
      }
    }
  }

  @Test(.enabled(if: TLSTools.available && OpenSSL.loaded != nil, "needs openssl, python3 and OpenSSL 3"))
  func httpsGoesThroughTheTunnelWithTLSEndToEnd() async throws {
    try await Microsocks.with { socks in
      let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "SOCKS-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: directory) }
      let (server, certificate) = try await offThePool {
        Result {
          let certificate = try TestCertificate.make(
            commonName: "localhost", alternativeNames: "DNS:localhost,IP:127.0.0.1", in: directory)
          return (try TLSServer(serving: certificate), certificate)
        }
      }.get()
      defer { server.stop() }
      var configuration = HTTPClient.Configuration(retryPolicy: .none)
      configuration.proxyEnvironment = ["https_proxy": "socks5h://127.0.0.1:\(socks.port)"]
      configuration.serverTrust = .init(additionalCertificates: [
        try Data(contentsOf: certificate.certificate)
      ])
      let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration)
      #expect(try await client.get("config").text().value == "hello over TLS")
      #expect(await socks.connected(to: "127.0.0.1:\(server.port)"), "\(socks.log)")
    }
  }

  @Test func theProxysCredentialsAreSentAndARefusalIsTyped() async throws {
    try await Microsocks.with(user: "ada", password: "s3cret") { socks in
      try await withServer({ router in
        router.on("GET", "/config") { _ in .respond(.text("authenticated")) }
      }) { server in
        let url = "http://127.0.0.1:\(server.server.port)/config"
        for (credentials, expected) in [
          ("ada:s3cret@", nil), ("", URLError.Code.userAuthenticationRequired),
          ("ada:wrong@", .userAuthenticationRequired),
        ] {
          let proxy = "socks5h://\(credentials)127.0.0.1:\(socks.port)"
          let (result, _) = await outcome(of: client(server, proxy: proxy).get("config").text())
          if let expected {
            guard case .transport(let error, _)? = httpError(result) else {
              Issue.record("\(credentials): expected a transport error, got \(result)")
              continue
            }
            #expect(error.code == expected, "\(credentials): \(error.localizedDescription)")
            #expect(error.localizedDescription.contains("proxy 127.0.0.1:\(socks.port)"))
          } else {
            #expect(try result.get() == "authenticated")
          }
          if hasCurl {
            let (status, _) = try await curl(url, proxy: proxy)
            #expect((status == 0) == (expected == nil), "curl \(credentials): \(status)")
          }
        }
      }
    }
  }

  @Test func aDestinationThatRefusesIsCannotConnectToHostWithTheProxysReason() async throws {
    try await Microsocks.with { socks in
      let closed = try ClosedPort()
      var configuration = HTTPClient.Configuration(retryPolicy: .none)
      configuration.proxyEnvironment = ["all_proxy": "socks5h://127.0.0.1:\(socks.port)"]
      let client = HTTPClient(baseURL: closed.baseURL, configuration: configuration)
      let (result, _) = await outcome(of: client.get("x"))
      guard case .transport(let error, _)? = httpError(result) else {
        Issue.record("expected a transport error, got \(result)")
        return
      }
      #expect(error.code == .cannotConnectToHost)
      #expect(
        error.localizedDescription.contains(
          "could not connect to 127.0.0.1:\(closed.port): connection refused (5)"),
        "\(error.localizedDescription)")
      if hasCurl {
        let (status, _) = try await curl(
          closed.baseURL.absoluteString, proxy: "socks5h://127.0.0.1:\(socks.port)")
        #expect(status != 0, "curl reaches a closed port")
      }
    }
  }
}

extension SOCKSTests {
  /// A "proxy" on 127.0.0.1 that reads the greeting and then, as its argument says, answers
  /// with HTTP (`garbage`), closes (`close`) or never answers (`stall`); prints "port N".
  static let hostileProxy = """
    import socket, sys, threading, time
    mode = sys.argv[1]
    listener = socket.create_server(("127.0.0.1", 0))
    print("port", listener.getsockname()[1], flush=True)
    def serve(client):
        client.recv(16)
        if mode == "garbage":
            client.sendall(b"HTTP/1.1 400 Bad Request\\r\\n\\r\\n")
        elif mode == "stall":
            time.sleep(60)
        client.close()
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()
    """

  /// `expected`: the transport error's code, or `nil` for the request's own deadline
  /// (`HTTPError.timedOut`).
  @Test(arguments: [
    ("garbage", URLError.Code.cannotParseResponse), ("close", .cannotConnectToHost), ("stall", nil),
  ])
  func aProxyThatDoesNotSpeakSOCKS5FailsTheRequestTyped(_ mode: String, _ expected: URLError.Code?)
    async throws
  {
    _ = loopbackBypassesProxy
    let (process, output) = try await offThePool {
      Result { try PythonProcess.start(script: Self.hostileProxy, arguments: [mode]) }
    }.get()
    defer {
      process.closeStandardInput()
      process.terminate(grace: .seconds(5))
    }
    let line = await offThePool { output.first(from: 0, withPrefix: "port ", timeout: .seconds(30)) }
    let port = try #require(line.flatMap { Int($0.dropFirst("port ".count)) }, "\(output.all)")
    // 1 s for the silent one; the others answer at once, and a loaded machine must not turn
    // their answers into a timeout.
    let deadline: Duration = expected == nil ? .seconds(1) : .seconds(30)
    var configuration = HTTPClient.Configuration(retryPolicy: .none, timeout: deadline)
    configuration.proxyEnvironment = ["all_proxy": "socks5h://127.0.0.1:\(port)"]
    let client = HTTPClient(baseURL: URL(string: "http://example.invalid/")!, configuration: configuration)
    let (result, _) = await outcome(of: client.get("x"))
    switch httpError(result) {
    case .transport(let error, _)?:
      #expect(error.code == expected, "\(mode): \(error.localizedDescription)")
    case .timedOut(_, let allowed)?:
      #expect(expected == nil && allowed == .seconds(1), "\(mode): timed out")
    case let other:
      Issue.record("\(mode): got \(String(describing: other))")
    }
  }
}

/// microsocks, a SOCKS5 server we did not write, run as this process's child on a loopback
/// port by a python3 watcher that stops it when its input closes (or this process exits). It
/// logs each tunnel it opens: "client[N] 127.0.0.1: connected to HOST:PORT".
final class Microsocks: Sendable {
  /// The `microsocks` executable on PATH (or in /usr/bin), if there is one.
  static let executable: String? = {
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/bin"
    return path.split(separator: ":").map { "\($0)/microsocks" }.first {
      FileManager.default.isExecutableFile(atPath: $0)
    }
  }()

  /// The port it listens on, on 127.0.0.1.
  let port: Int
  private let process: ChildProcess
  private let output: Lines
  private let directory: URL

  // Arguments: microsocks, a scratch directory (removed when it stops), then microsocks's own.
  private static let script = """
    import os, shutil, socket, subprocess, sys, time
    microsocks, root = sys.argv[1:3]
    \(pythonStartOnFreePort)
    def command(port):
        return [microsocks, "-i", "127.0.0.1", "-p", str(port)] + sys.argv[3:]
    server, port = start_on_free_port(command, sys.stdout)
    print("port", port, flush=True)
    \(pythonWatcherEnd)
    """

  private init(arguments: [String]) throws {
    guard let microsocks = Self.executable else {
      throw TLSFixtureError(description: "no microsocks on PATH (apt-get install microsocks)")
    }
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("PromiseHTTPTests-microsocks-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let started: (ChildProcess, Lines)
    do {
      started = try PythonProcess.start(
        script: Self.script, arguments: [microsocks, directory.path] + arguments)
    } catch {
      try? FileManager.default.removeItem(at: directory)
      throw error
    }
    let (process, output) = started
    self.process = process
    self.output = output
    self.directory = directory
    guard let line = output.first(from: 0, withPrefix: "port ", timeout: .seconds(60)),
      let port = Int(line.dropFirst("port ".count))
    else {
      // The watcher is still starting microsocks (it reads its input only afterwards): stop it.
      process.closeStandardInput()
      process.terminate(grace: .seconds(10))
      try? FileManager.default.removeItem(at: directory)
      throw TLSFixtureError(description: "microsocks did not start: \(output.all)")
    }
    self.port = port
  }

  /// Runs `body` with a microsocks of its own (asking for `user` and `password` if given), and
  /// stops it afterwards.
  static func with<T>(
    user: String? = nil, password: String? = nil, _ body: (Microsocks) async throws -> T
  ) async throws -> T {
    _ = loopbackBypassesProxy
    let arguments = user.map { ["-u", $0, "-P", password ?? ""] } ?? []
    let socks = try await offThePool { Result { try Microsocks(arguments: arguments) } }.get()
    defer { socks.stop() }
    return try await body(socks)
  }

  /// What it printed so far.
  var log: [String] { output.all }

  /// Whether it logs a tunnel to `target` ("HOST:PORT"), waiting for the line at most 20 s (it
  /// comes through a pipe, and may lag behind the response).
  func connected(to target: String) async -> Bool {
    await eventually { self.log.contains { $0.hasSuffix("connected to \(target)") } }
  }

  /// Stops it: the watcher, its input closed, stops microsocks and removes the scratch
  /// directory; a watcher that has not exited 15 s later (it gives microsocks 10 s) is
  /// terminated, and the directory is removed here. (Terminating at once killed the watcher
  /// before it removed the directory: one was left in the temporary folder per test.)
  func stop() {
    process.closeStandardInput()
    if process.wait(timeout: .seconds(15)) == nil { process.terminate(grace: .seconds(10)) }
    try? FileManager.default.removeItem(at: directory)
  }
}
