import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

#if canImport(Glibc)
  /// The set-up of the socket transport's connections through the client: a cancel or a deadline
  /// while connecting ends the attempt and lets go of its socket at once, and a refused
  /// connection reads as it does over `URLSession`.
  @Suite(
    "Socket transport connection set-up", .timeLimit(.minutes(1)),
    .enabled(if: socketTransportServesLoopback, "a proxy in the environment turns the socket transport off"))
  struct SocketTransportConnectTests {
    /// How long a transfer's socket may outlive its settled promise: far less than the client's
    /// 30 s timeout, past which the connect would have given up by itself.
    static let letGo = Duration.seconds(5)

    @Test func aCancelWhileConnectingEndsTheConnectAndItsSocketAtOnce() async throws {
      let listener = try FullBacklogListener()
      let port = listener.port
      try await withDownloadDirectory { directory in
        let client = HTTPClient(
          baseURL: URL(string: "http://127.0.0.1:\(port)/")!,
          configuration: .init(retryPolicy: .none, timeout: .seconds(30)))
        let download = client.download("file", to: directory.file())
        // The transfer has reached its connect: its SYN waits in vain.
        #expect(await eventually { connectingSockets(toPort: port) == 1 })
        download.cancel()
        let (result, _) = await outcome(of: download)
        #expect(throws: CancellationError.self) { try result.get() }
        // The thread closes the socket as its last step before it ends.
        #expect(await eventually(within: Self.letGo) { connectingSockets(toPort: port) == 0 })
        #expect(directory.names.isEmpty)
      }
      withExtendedLifetime(listener) {}
    }

    @Test func aTimeoutWhileConnectingEndsTheConnectAndItsSocketAtOnce() async throws {
      let listener = try FullBacklogListener()
      let port = listener.port
      try await withDownloadDirectory { directory in
        // The client's timer, on virtual time, passes the 30 s when the test says; the socket's
        // own idle timeout (31 s, in real time) is far away.
        let clock = VirtualTimeScheduler()
        let client = HTTPClient(
          baseURL: URL(string: "http://127.0.0.1:\(port)/")!,
          configuration: .init(retryPolicy: .none, timeout: .seconds(30), scheduler: clock))
        let download = client.download("file", to: directory.file())
        #expect(await eventually { connectingSockets(toPort: port) == 1 })
        clock.advance(by: .seconds(30))
        let (result, _) = await outcome(of: download)
        guard case .timedOut? = httpError(result) else {
          Issue.record("expected a timeout, got \(result)")
          return
        }
        #expect(await eventually(within: Self.letGo) { connectingSockets(toPort: port) == 0 })
        #expect(directory.names.isEmpty)
      }
      withExtendedLifetime(listener) {}
    }

    @Test(arguments: ["127.0.0.1", "localhost"])
    func aRefusedConnectionReadsAlikeOverBothTransports(_ host: String) async throws {
      let closed = try ClosedPort()
      let port = closed.port
      let directory = try DownloadDirectory()
      defer { directory.remove() }
      var texts: [String] = []
      for transport in [HTTPClient.Engine.automatic, .urlSession] {
        var configuration = HTTPClient.Configuration(retryPolicy: .none, timeout: .seconds(30))
        configuration.engine = transport
        let client = HTTPClient(
          baseURL: URL(string: "http://\(host):\(port)/")!, configuration: configuration)
        let (result, _) = await outcome(of: client.download("file", to: directory.file()))
        guard case .transport(let error, _)? = httpError(result) else {
          Issue.record("\(transport): got \(result)")
          continue
        }
        #expect(error.code == .cannotConnectToHost)
        texts.append("\(HTTPError.transport(error, url: URL(string: "http://\(host):\(port)/file")))")
      }
      // libcurl's "Failed to connect to 127.0.0.1 port 8080 after 0 ms: Couldn't connect to
      // server"; the socket transport gives the system's reason ("Connection refused").
      let prefix =
        "HTTP transport error -1004 (cannot connect to host: Failed to connect to \(host) port \(port) after "
      for text in texts {
        #expect(text.hasPrefix(prefix), "\(text)")
        #expect(text.hasSuffix(" for http://\(host):\(port)/file"), "\(text)")
      }
      #expect(texts.count == 2)
    }
  }

  /// The set-up of a `SocketConnection` on its own: its stop, and how it tries each address.
  ///
  /// "localhost" resolves to 127.0.0.1 alone on some machines (this one's `/etc/hosts`), so the
  /// addresses are resolved one by one and given in the order a resolver would give `::1` and
  /// `127.0.0.1`, with the port of a loopback server that listens on IPv4 only.
  @Suite("SocketConnection set-up", .timeLimit(.minutes(1)))
  struct SocketConnectionSetUpTests {
    /// A request that the loopback server answers with `200 OK`.
    static let request = Array("GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)

    /// How `exchange(_:_:port:)` ended.
    struct Outcome: Sendable {
      /// The error's code; `nil` when the exchange succeeded.
      var code: URLError.Code?
      /// The error's text; empty when the exchange succeeded.
      var message = ""
      /// The response's first line.
      var line = ""
      /// How long the connect took.
      var elapsed = Duration.zero
    }

    /// `::1` and `127.0.0.1` at `port`, in the order a resolver gives a "localhost" with both.
    static func localhostAddresses(port: Int) throws(URLError) -> [SocketConnection.Address] {
      try SocketConnection.resolve(host: "::1", port: port)
        + SocketConnection.resolve(host: "127.0.0.1", port: port)
    }

    /// Connects a connection with `idleTimeout` to the addresses of "localhost" at `port` and
    /// sends `request`.
    static func exchange(port: Int, idleTimeout: TimeInterval) -> Outcome {
      let connection = SocketConnection(idleTimeout: idleTimeout)
      let start = ContinuousClock.now
      var outcome = Outcome()
      do throws(URLError) {
        try connection.connect(to: localhostAddresses(port: port), host: "localhost", port: port)
        outcome.elapsed = ContinuousClock.now - start
        try connection.send(contentsOf: request)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 1)
        defer { buffer.deallocate() }
        let count = try connection.receive(into: buffer)
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: buffer[..<count]), as: UTF8.self)
        outcome.line = text.components(separatedBy: "\r\n")[0]
      } catch {
        if outcome.elapsed == .zero { outcome.elapsed = ContinuousClock.now - start }
        outcome.code = error.code
        outcome.message = error.localizedDescription
      }
      return outcome
    }

    @Test func aStopWhileConnectingWakesTheConnectAtOnce() async throws {
      let listener = try FullBacklogListener()
      let port = listener.port
      let connection = SocketConnection(idleTimeout: 120)
      // The instant the connect returned, taken on its own thread: the hops back to the test
      // have taken 5.4 s on a loaded machine in CI.
      async let ended = offThePool { () -> (URLError.Code?, ContinuousClock.Instant) in
        do {
          try connection.connect(host: "127.0.0.1", port: port)
          return (nil, .now)
        } catch {
          return ((error as? URLError)?.code, .now)
        }
      }
      #expect(await eventually { connectingSockets(toPort: port) == 1 })
      let stopped = ContinuousClock.now
      connection.stop()
      let (code, returned) = await ended
      #expect(code == .cancelled)
      // Far below the 120 s the connect would otherwise wait.
      #expect(returned - stopped < .seconds(30), "\(returned - stopped)")
      connection.close()
      #expect(connectingSockets(toPort: port) == 0)
      withExtendedLifetime(listener) {}
    }

    @Test func aStoppedConnectionStartsNoConnectAfterTheLookup() async throws {
      let closed = try ClosedPort()
      let port = closed.port
      let code = await offThePool { () -> URLError.Code? in
        do {
          let addresses = try SocketConnection.resolve(host: "127.0.0.1", port: port)
          let connection = SocketConnection(idleTimeout: 5)
          // As when `cancel()` comes while the name is looked up.
          connection.stop()
          try connection.connect(to: addresses, host: "127.0.0.1", port: port)
          return nil
        } catch {
          return (error as? URLError)?.code
        }
      }
      // A connect would have been refused.
      #expect(code == .cancelled)
    }

    @Test func aRefusedFirstAddressFallsThroughToTheNext() async throws {
      try await withServer({ router in
        router.on("GET", "/ok") { _ in .respond(.text("ok")) }
      }) { server in
        let port = server.server.port
        let outcome = await offThePool { Self.exchange(port: port, idleTimeout: 5) }
        #expect(outcome.code == nil, "\(outcome.message)")
        #expect(outcome.line == "HTTP/1.1 200 OK")
      }
    }

    @Test func aFirstAddressThatDoesNotAnswerGetsHalfTheTimeAndTheNextIsTried() async throws {
      // The server's port on ::1 may be taken by another test meanwhile ("Address already in
      // use", as in the test below): then another server, on another port.
      for _ in 0..<20 {
        let tested = try await withServer({ router in
          router.on("GET", "/ok") { _ in .respond(.text("ok")) }
        }) { server -> Bool in
          let port = server.server.port
          let silent: FullBacklogListener
          do {
            silent = try FullBacklogListener(host: "::1", port: port)
          } catch let error as POSIXError where error.code == .EADDRINUSE {
            return false
          }
          let outcome = await offThePool { Self.exchange(port: port, idleTimeout: 4) }
          #expect(outcome.code == nil, "\(outcome.message)")
          #expect(outcome.line == "HTTP/1.1 200 OK")
          // Half of the 4 s on ::1, then 127.0.0.1 at once (timed on the connecting thread; the
          // 2 s to spare are for a loaded machine).
          #expect(outcome.elapsed >= .seconds(2) && outcome.elapsed < .seconds(4), "\(outcome.elapsed)")
          // The attempt on ::1 let go of its socket.
          #expect(connectingSockets(toPort: port) == 0)
          withExtendedLifetime(silent) {}
          return true
        }
        if tested { return }
      }
      Issue.record("no port was free on both 127.0.0.1 and ::1 in 20 tries")
    }

    @Test func addressesThatDoNotAnswerShareOneIdleTimeout() async throws {
      // The system picks a free port on ::1; the same port on 127.0.0.1 may be taken by another
      // test meanwhile ("Address already in use", seen once in CI): then try another port.
      var listeners: (FullBacklogListener, FullBacklogListener)?
      for _ in 0..<20 where listeners == nil {
        let candidate = try FullBacklogListener(host: "::1")
        if let other = try? FullBacklogListener(host: "127.0.0.1", port: candidate.port) {
          listeners = (candidate, other)
        }
      }
      let (first, second) = try #require(listeners)
      let port = first.port
      let outcome = await offThePool { Self.exchange(port: port, idleTimeout: 4) }
      #expect(outcome.code == .timedOut)
      #expect(
        outcome.message.hasPrefix("Failed to connect to localhost port \(port) after "), "\(outcome.message)")
      #expect(outcome.message.hasSuffix(" ms: Connection timed out"), "\(outcome.message)")
      // 2 s on ::1, 2 s on 127.0.0.1: not 4 s each (3 s to spare for a loaded machine).
      #expect(outcome.elapsed >= .seconds(4) && outcome.elapsed < .seconds(7), "\(outcome.elapsed)")
      #expect(connectingSockets(toPort: port) == 0)
      withExtendedLifetime((first, second)) {}
    }
  }
#endif
