import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif
#if canImport(Glibc)
  import Glibc
#endif

/// HTTPS transfers over the socket transport (TLS through the system's OpenSSL 3, loaded at run
/// time) against a python3 `ssl` server with certificates the tests make with `openssl`:
/// verification, typed errors, the client's additional authorities and key pins, cancellation
/// during the handshake.
@Suite(
  "Socket TLS", .timeLimit(.minutes(1)),
  .enabled(if: TLSTools.available, "needs openssl and python3 on PATH to make a certificate and serve it"),
  .enabled(if: OpenSSL.loaded != nil, "needs OpenSSL 3 (libssl.so.3) to load"))
struct SocketTLSTests {
  @Test func aDownloadWithTheCertificateInTheConfigurationArrivesWhole() async throws {
    try await withFileServer { server, certificate in
      let client = HTTPClient(
        baseURL: server.baseURL(),
        configuration: configuration(trusting: certificate))
      try await withDirectory { directory in
        let file = directory.appendingPathComponent("take.bin")
        let size = 3 << 20 + 12_345
        let download = try await client.download("bytes/\(size)", to: file).value
        #expect(download.response.statusCode == 200)
        let data = try Data(contentsOf: file)
        #expect(data.count == size)
        #expect(data == TLSFileServer.body(size), "byte-identical")
        let requests = server.requests(expecting: 1)
        #expect(requests == ["GET /bytes/\(size) HTTP/1.1 | PromiseHTTP"], "over the socket transport")
      }
    }
  }

  @Test func aStreamOverHTTPSArrivesWhole() async throws {
    try await withFileServer { server, certificate in
      let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration(trusting: certificate))
      let size = 1 << 20 + 7
      let response = try await client.stream("bytes/\(size)").value
      var received = Data()
      for try await chunk in response.body { received.append(chunk) }
      #expect(received == TLSFileServer.body(size))
      #expect(server.requests(expecting: 1) == ["GET /bytes/\(size) HTTP/1.1 | PromiseHTTP"])
    }
  }

  @Test func anUploadOverHTTPSIsSent() async throws {
    try await withFileServer { server, certificate in
      let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration(trusting: certificate))
      let body = TLSFileServer.body(300_000)
      let response = try await client.upload(.data(body), to: "upload", method: .put).value
      #expect(response.statusCode == 200)
      #expect(String(decoding: response.body, as: UTF8.self) == "received \(body.count)")
      #expect(server.requests(expecting: 1) == ["PUT /upload HTTP/1.1 | PromiseHTTP"])
    }
  }

  /// A server that drops the connection while an HTTPS upload is being sent: the upload fails
  /// with a typed error, thirty times over, and the process lives. OpenSSL writes to the socket
  /// with `write`, which raises SIGPIPE on a connection the peer has reset (before the socket
  /// transport's threads blocked it, this killed the process in 1 run of 3); the write now
  /// fails with EPIPE. In a child process, so that a SIGPIPE fails this test, not the run.
  @Test(.tags(.childProcess)) func aServerThatDropsAnHTTPSUploadEndsInAnErrorNotASignal() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
      do {
        try await withFileServer { server, certificate in
          let client = HTTPClient(
            baseURL: server.baseURL(), configuration: configuration(trusting: certificate))
          let body = TLSFileServer.body(16 << 20)
          for attempt in 0..<30 {
            let (result, _) = await outcome(of: client.upload(.data(body), to: "slam", method: .put))
            guard case .failure(HTTPError.transport(let error, _)) = result,
              [.networkConnectionLost, .cannotConnectToHost].contains(error.code)
            else {
              print("PROBLEM | attempt \(attempt): \(result)")
              exit(1)
            }
          }
        }
      } catch {
        print("PROBLEM | \(error)")
        exit(1)
      }
    }
    if let output = result?.standardOutputContent, !output.isEmpty {
      #expect(
        !String(decoding: output, as: UTF8.self).contains("PROBLEM"),
        "\(String(decoding: output, as: UTF8.self))")
    }
  }

  @Test func anAnswerBeforeTheBodyOverHTTPSIsDeliveredWhileTheServerHoldsTheConnection() async throws {
    // The server answers 413 and keeps the connection open, reading nothing: the answer has to
    // be found while the body waits on a full send buffer (the request's 20 s would otherwise
    // end it, as a timeout; the server holds it for 60 s).
    try await withFileServer { server, certificate async throws in
      var settings = configuration(trusting: certificate)
      settings.timeout = .seconds(20)
      let client = HTTPClient(baseURL: server.baseURL(), configuration: settings)
      let (result, _) = await outcome(
        of: client.upload(.data(TLSFileServer.body(32 << 20)), to: "early", method: .put))
      guard case .unacceptableStatus(let status, _, let excerpt, _)? = httpError(result) else {
        Issue.record("got \(String(describing: httpError(result)))")
        return
      }
      #expect(status == 413)
      #expect(excerpt == "too large")
      #expect(await eventually { server.log.contains("answered early") }, "read from a pipe")
    }
  }

  @Test func anInterimAnswerDuringAnUploadOverHTTPSIsReadAway() async throws {
    try await withFileServer { server, certificate async throws in
      let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration(trusting: certificate))
      let body = TLSFileServer.body(32 << 20)
      let response = try await client.upload(.data(body), to: "continue", method: .put).value
      #expect(response.statusCode == 200)
      #expect(String(decoding: response.body, as: UTF8.self) == "received \(body.count)")
    }
  }

  /// Where no OpenSSL 3 can be loaded (here: `PROMISEHTTP_OPENSSL_DIR` names a directory without
  /// one, set in a child process before the library is first looked for), a request that only
  /// the socket transport could make safely is refused unsent, and the error says why.
  @Test(.tags(.childProcess)) func withoutOpenSSLAPinnedHostIsRefusedNamingTheMissingLibrary() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardOutputContent]) {
      setenv("PROMISEHTTP_OPENSSL_DIR", "/nonexistent-openssl", 1)
      var settings = HTTPClient.Configuration(retryPolicy: .none)
      settings.serverTrust = .init(publicKeyPins: ["127.0.0.1": [Data(repeating: 0, count: 32)]])
      // Port 9 (discard): nothing is listening, and nothing may be sent anyway.
      let client = HTTPClient(baseURL: URL(string: "https://127.0.0.1:9/")!, configuration: settings)
      let (result, _) = await outcome(of: client.get("config"))
      guard OpenSSL.loaded == nil else {
        print("PROBLEM | OpenSSL was loaded from a directory without it")
        exit(1)
      }
      guard case .failure(HTTPError.transport(let error, _)) = result, error.code == .secureConnectionFailed
      else {
        print("PROBLEM | expected a refusal, got \(result)")
        exit(1)
      }
      let message = error.failureMessage ?? ""
      for part in ["no OpenSSL 3 library could be loaded", "/nonexistent-openssl/libssl.so.3", "not sent"]
      where !message.contains(part) {
        print("PROBLEM | the message does not say \"\(part)\": \(message)")
        exit(1)
      }
    }
    DeadlineTests.recordProblems(of: result)
  }

  @Test func bytesAfterAnAnswerOverTLSAreNeverReadAsTheNextAnswer() async throws {
    // The planted response comes in the same TLS record as the answer, so it is decrypted and
    // read with it: bytes past the answer's framed end keep the connection out of the pool.
    try await withFileServer { server, certificate async throws in
      let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration(trusting: certificate))
      #expect(try await client.get("planted").value.text == "ok")
      #expect(try await client.get("planted").value.text == "ok")
      #expect(try await client.get("bytes/5").value.body.count == 5)
      #expect(try server.connections() == 3, "no connection taken again")
      #expect(!server.log.contains("request on the planted connection"))
    }
  }

  @Test func aRecordReadAheadButNotYetDecryptedMakesAnIdleConnectionUnquiet() async throws {
    // Read ahead, OpenSSL takes both records off the socket to decrypt the first: the second
    // waits in its buffer, where neither the socket nor `SSL_pending` shows it.
    try await withFileServer { server, certificate async throws in
      let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
      let connection = SocketConnection(idleTimeout: 5)
      try await offThePool {
        Result { () throws(URLError) in
          try connection.connect(host: "127.0.0.1", port: server.port)
          let context = try TLSContext(trust: .init(additionalCertificates: [certificate]))
          try connection.startTLS(host: "127.0.0.1", context: context)
          try connection.send(contentsOf: Array("GET /two-records HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        }
      }.get()
      #expect(await eventually { server.log.contains("two records sent") })
      // Exactly the answer's bytes: a buffer with room for more would take the second too.
      let received = try await offThePool {
        Result { () throws(URLError) -> [UInt8] in
          let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: answer.utf8.count, alignment: 1)
          defer { buffer.deallocate() }
          var read = 0
          while read < buffer.count {
            let count = try connection.receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[read...]))
            if count == 0 { break }
            read += count
          }
          return Array(buffer[..<read])
        }
      }.get()
      #expect(String(decoding: received, as: UTF8.self) == answer)
      #expect(!connection.isQuietWhileIdle, "the second response is unread")
      connection.close()
    }
  }

  @Test func aSelfSignedCertificateIsUntrustedAndLeavesNoFile() async throws {
    try await withFileServer { server, _ in
      let client = HTTPClient(baseURL: server.baseURL(), configuration: .init(retryPolicy: quickRetries(3)))
      try await withDirectory { directory in
        let file = directory.appendingPathComponent("take.bin")
        let (result, _) = await outcome(of: client.download("bytes/10", to: file))
        let error = try urlError(result)
        #expect(error.code == .serverCertificateUntrusted)
        #expect(error.localizedDescription.hasPrefix("SSL certificate problem: self-signed certificate"))
        #expect(error.localizedDescription.contains("127.0.0.1"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
        #expect(server.requests().isEmpty, "nothing sent before the certificate was checked")
      }
    }
  }

  @Test func aTrustedCertificateForAnotherHostIsRefusedNamingTheHost() async throws {
    try await withFileServer(alternativeNames: "DNS:other.example") { server, certificate in
      let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration(trusting: certificate))
      let (result, _) = await outcome(of: client.stream("bytes/10"))
      let error = try urlError(result)
      #expect(error.code == .serverCertificateUntrusted)
      #expect(
        error.localizedDescription.hasPrefix(
          "SSL: no alternative certificate subject name matches target host name '127.0.0.1'"),
        "\(error.localizedDescription)")
      #expect(server.requests().isEmpty)
    }
  }

  @Test func anExpiredCertificateHasABadDate() async throws {
    try await withDirectory { directory in
      let (authority, leaf) = try await offThePool {
        Result { try TLSFixtures.expiredChain(in: directory) }
      }.get()
      let server = try await offThePool { Result { try TLSFileServer.start(serving: leaf) } }.get()
      defer { server.stop() }
      let client = HTTPClient(
        baseURL: server.baseURL(),
        configuration: configuration(trusting: try Data(contentsOf: authority.certificate)))
      let (result, _) = await outcome(
        of: client.download("bytes/10", to: directory.appendingPathComponent("f")))
      let error = try urlError(result)
      #expect(error.code == .serverCertificateHasBadDate)
      #expect(error.localizedDescription.hasPrefix("SSL certificate problem: certificate has expired"))
    }
  }

  /// A server that requires a client certificate (the socket transport sends none): under
  /// TLS 1.3 its `certificate_required` alert arrives after the handshake, when the answer is
  /// read, and is `.clientCertificateRequired`, not a lost connection that a retry policy would
  /// send again; under TLS 1.2 the handshake fails with the server's alert.
  @Test(arguments: [false, true]) func aServerThatRequiresAClientCertificateIsRefusedOnce(tls12: Bool)
    async throws
  {
    // The server asks for a client certificate signed by its own certificate, and gets none.
    let script: @Sendable (TestCertificate) -> String = {
      TLSServer.script(clientsSignedBy: $0.certificate.path, maximumTLS12: tls12)
    }
    try await withScriptedServer(script) { server, certificate in
      let client = HTTPClient(
        baseURL: server.baseURL(),
        configuration: configuration(trusting: try Data(contentsOf: certificate.certificate)))
      let (result, _) = await outcome(of: client.get("config"))
      let error = try urlError(result)
      if tls12 {
        #expect(error.code == .secureConnectionFailed, "\(error.localizedDescription)")
        #expect(
          error.localizedDescription.contains("alert handshake failure"), "\(error.localizedDescription)")
      } else {
        #expect(error.code == .clientCertificateRequired, "\(error.localizedDescription)")
        #expect(
          error.localizedDescription.hasPrefix("The server requires a client certificate"),
          "\(error.localizedDescription)")
      }
      let connections = try await offThePool { Result { try server.connections() } }.get()
      #expect(connections == 1, "not retried: \(server.log)")
    }
  }

  /// The client ends a connection with TLS's close_notify before its socket closes (RFC 8446,
  /// section 6.1), as curl does against the same server in the same run: the server can tell a
  /// client that is done from one cut off.
  @Test func aConnectionEndsWithCloseNotifyAsCurlsDoes() async throws {
    let script: @Sendable (TestCertificate) -> String = { _ in
      TLSServer.script(reportingHowClientsClose: true)
    }
    try await withScriptedServer(script) { server, certificate in
      if FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") {
        let url = server.baseURL().appendingPathComponent("config").absoluteString
        let curl = try await offThePool {
          Result {
            try ChildProcess.run(
              "/usr/bin/curl", ["-sS", "--cacert", certificate.certificate.path, url],
              mergingStandardError: true, timeout: .seconds(60))
          }
        }.get()
        #expect(curl.standardOutputText == "hello over TLS", "\(curl.standardOutputText)")
        let closing = await offThePool {
          server.output.first(from: 0, withPrefix: "closed", timeout: .seconds(30))
        }
        #expect(closing == "closed with close_notify", "curl: \(server.log)")
      }
      let start = server.output.count
      let client = HTTPClient(
        baseURL: server.baseURL(),
        configuration: configuration(trusting: try Data(contentsOf: certificate.certificate)))
      #expect(try await client.get("config").text().value == "hello over TLS")
      let closing = await offThePool {
        server.output.first(from: start, withPrefix: "closed", timeout: .seconds(30))
      }
      #expect(closing == "closed with close_notify", "\(server.log)")
    }
  }

  /// A server that ends the stream without TLS's close_notify (a FIN after its answer): a body
  /// that only the end delimits is taken as it came, and one cut short of its Content-Length
  /// fails, as curl 7.88 takes each in the same run (exit 0 with the bytes; an error).
  @Test func anEndWithoutCloseNotifyIsReadAsCurlReadsIt() async throws {
    let script: @Sendable (TestCertificate) -> String = { _ in
      """
      import os, socket, ssl, sys, threading
      context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
      context.load_cert_chain(sys.argv[1], sys.argv[2])
      listener = socket.create_server(("127.0.0.1", 0))
      def control():
          while sys.stdin.readline():
              pass
          os._exit(0)
      threading.Thread(target=control, daemon=True).start()
      print("port", listener.getsockname()[1], flush=True)
      while True:
          raw, _ = listener.accept()
          raw.settimeout(10)
          try:
              tls = context.wrap_socket(raw, server_side=True)
              head = b""
              while b"\\r\\n\\r\\n" not in head:
                  chunk = tls.recv(4096)
                  if not chunk:
                      break
                  head += chunk
              length = b"Content-Length: 2000" if head.split(b" ")[1] == b"/short" else b"Connection: close"
              tls.sendall(b"HTTP/1.1 200 OK\\r\\n" + length + b"\\r\\n\\r\\n" + b"x" * 1000)
              # The end of the TCP stream, without TLS's close_notify.
              plain = socket.socket(fileno=tls.detach())
              plain.shutdown(socket.SHUT_RDWR)
              plain.close()
          except (OSError, ValueError) as error:
              print("failed", error, flush=True)
              raw.close()
      """
    }
    try await withScriptedServer(script) { server, certificate in
      if FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") {
        let runs = try await offThePool {
          Result {
            try ["whole", "short"].map { path in
              try ChildProcess.run(
                "/usr/bin/curl",
                ["-sS", "--cacert", certificate.certificate.path, server.baseURL().absoluteString + path],
                timeout: .seconds(60))
            }
          }
        }.get()
        #expect(runs[0].isSuccess && runs[0].standardOutputText == String(repeating: "x", count: 1000))
        #expect(!runs[1].isSuccess, "curl took the short body: \(runs[1].summary)")
      }
      var configuration = configuration(trusting: try Data(contentsOf: certificate.certificate))
      configuration.retryPolicy = .none
      let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration)
      #expect(try await client.get("whole").value.body == Data(repeating: UInt8(ascii: "x"), count: 1000))
      let (result, _) = await outcome(of: client.get("short"))
      #expect(try urlError(result).code == .networkConnectionLost)
    }
  }

  @Test func aMatchingPinIsAcceptedAndAnotherKeyIsRefused() async throws {
    try await withFileServer { server, certificate in
      let pin = try TLSContext.publicKeyPin(ofPEM: certificate)
      var trust = HTTPClient.ServerTrust(
        additionalCertificates: [certificate], publicKeyPins: ["127.0.0.1": [pin]])
      var configuration = HTTPClient.Configuration(retryPolicy: quickRetries(3))
      configuration.serverTrust = trust
      let pinned = HTTPClient(baseURL: server.baseURL(), configuration: configuration)
      let response = try await pinned.stream("bytes/100").value
      var received = Data()
      for try await chunk in response.body { received.append(chunk) }
      #expect(received == TLSFileServer.body(100))

      var other = pin
      other[0] ^= 0xFF
      trust.publicKeyPins = ["127.0.0.1": [other]]
      configuration.serverTrust = trust
      let mispinned = HTTPClient(baseURL: server.baseURL(), configuration: configuration)
      let (result, _) = await outcome(of: mispinned.stream("bytes/100"))
      let error = try urlError(result)
      #expect(error.code == .serverCertificateUntrusted)
      #expect(
        error.localizedDescription.hasPrefix("SSL: public key does not match pinned public key for 127.0.0.1")
      )
      #expect(error.localizedDescription.contains(pin.base64EncodedString()), "names the server's key")
      #expect(server.requests(expecting: 1).count == 1, "the mispinned request was not sent")
    }
  }

  @Test func aRequestToAPinnedHostThatURLSessionWouldCarryFailsUnsent() async throws {
    try await withFileServer { server, certificate in
      let pin = try TLSContext.publicKeyPin(ofPEM: certificate)
      var configuration = HTTPClient.Configuration(retryPolicy: quickRetries(3))
      configuration.serverTrust = .init(
        additionalCertificates: [certificate], publicKeyPins: ["127.0.0.1": [pin]])
      configuration.engine = .urlSession
      let viaSession = HTTPClient(baseURL: server.baseURL(), configuration: configuration)
      let (result, _) = await outcome(of: viaSession.get("bytes/10"))
      let error = try urlError(result)
      #expect(error.code == .secureConnectionFailed)
      #expect(error.localizedDescription.contains("127.0.0.1 has public-key pins"))
      #expect(error.localizedDescription.contains("the urlSession engine"))
      let (download, _) = await outcome(of: viaSession.stream("bytes/10"))
      #expect(try urlError(download).code == .secureConnectionFailed)
      let connections = await offThePool { try? server.connections() }
      #expect(connections == 0, "nothing reached the server")
    }
  }

  @Test func anOrdinaryRequestToAPinnedHostGoesOverTheSocketTransportAndIsChecked() async throws {
    try await withFileServer { server, certificate in
      let pin = try TLSContext.publicKeyPin(ofPEM: certificate)
      var configuration = HTTPClient.Configuration(retryPolicy: .none)
      configuration.serverTrust = .init(
        additionalCertificates: [certificate], publicKeyPins: ["127.0.0.1": [pin]])
      let client = HTTPClient(baseURL: server.baseURL(), configuration: configuration)
      let response = try await client.get("bytes/10").value
      #expect(response.body == TLSFileServer.body(10))
      var other = pin
      other[0] ^= 0xFF
      configuration.serverTrust.publicKeyPins = ["127.0.0.1": [other]]
      let mispinned = HTTPClient(baseURL: server.baseURL(), configuration: configuration)
      let (result, _) = await outcome(of: mispinned.get("bytes/10"))
      #expect(try urlError(result).code == .serverCertificateUntrusted)
      #expect(server.requests(expecting: 1).count == 1, "the mispinned request was not sent")
    }
  }

  @Test func cancellingDuringTheHandshakeSettlesAtOnce() async throws {
    // A server that accepts TCP and reads the ClientHello, but never answers it.
    let listener = try SilentListener()
    defer { listener.close() }
    let client = HTTPClient(
      baseURL: URL(string: "https://127.0.0.1:\(listener.port)/")!,
      configuration: .init(retryPolicy: .none, timeout: .seconds(120)))
    let stream = client.stream("x")
    let hello = await offThePool { listener.awaitClientHello(timeout: 20) }
    #expect(hello, "a ClientHello arrived")
    let start = ContinuousClock.now
    stream.cancel()
    let (result, _) = await outcome(of: stream)
    let elapsed = ContinuousClock.now - start
    #expect(throws: CancellationError.self) { try result.get() }
    // Well below the 120 s idle timeout; not seconds, which a loaded machine can stall for.
    #expect(elapsed < .seconds(60), "settled in \(elapsed), the handshake's idle timeout is 120 s")
    #expect(await offThePool { listener.awaitClose(timeout: 30) }, "the connection was closed")
  }
}

/// Measures, without asserting, a 256 MiB HTTPS download through the socket transport against
/// `curl -o` from the same server: `PROMISEHTTP_MEASURE_TLS=1 swift test --filter measure`.
@Suite(
  "Socket TLS measurement",
  .enabled(
    if: ProcessInfo.processInfo.environment["PROMISEHTTP_MEASURE_TLS"] != nil && TLSTools.available,
    "set PROMISEHTTP_MEASURE_TLS=1 to measure"))
struct SocketTLSMeasurement {
  @Test func measureA256MiBDownloadAgainstCurl() async throws {
    try await withFileServer { server, certificate in
      try await withDirectory { directory in
        let size = 256 << 20
        let caFile = directory.appendingPathComponent("ca.pem")
        try certificate.write(to: caFile)
        let curlStart = ContinuousClock.now
        let curl = try await offThePool {
          Result {
            try ChildProcess.run(
              "/usr/bin/curl",
              [
                "-sS", "--cacert", caFile.path, "-o", directory.appendingPathComponent("curl.bin").path,
                server.baseURL().appendingPathComponent("bytes/\(size)").absoluteString,
              ], mergingStandardError: true, timeout: .seconds(120))
          }
        }.get()
        let curlTime = ContinuousClock.now - curlStart
        #expect(curl.isSuccess, "\(curl.standardOutputText)")
        let client = HTTPClient(
          baseURL: server.baseURL(),
          configuration: .init(timeout: .seconds(120)).with(trusting: certificate))
        try? Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/self/clear_refs"))
        let before = residentKiB("VmRSS")
        let start = ContinuousClock.now
        let download = try await client.download("bytes/\(size)", to: directory.appendingPathComponent("f"))
          .value
        let elapsed = ContinuousClock.now - start
        let peak = residentKiB("VmHWM")
        #expect(download.byteCount == Int64(size))
        let ratio = curlTime / elapsed
        print(
          "MEASURE | 256 MiB HTTPS | socket transport \(elapsed), curl \(curlTime), throughput ratio \(ratio)x curl"
            + " | peak RSS growth \((peak - before) / 1024) MiB")
      }
    }
  }

  private func residentKiB(_ field: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
  }
}

extension HTTPClient.Configuration {
  fileprivate func with(trusting certificate: Data) -> HTTPClient.Configuration {
    var configuration = self
    configuration.serverTrust = .init(additionalCertificates: [certificate])
    return configuration
  }
}

// MARK: Fixtures

/// A client configuration that trusts `certificate` (PEM) beside the system's store, with
/// quick retries (TLS failures are not retried).
private func configuration(trusting certificate: Data) -> HTTPClient.Configuration {
  var configuration = HTTPClient.Configuration(retryPolicy: quickRetries(3))
  configuration.serverTrust = .init(additionalCertificates: [certificate])
  return configuration
}

/// The `URLError` of a rejected outcome.
private func urlError<T>(
  _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
) throws -> URLError {
  let error = try #require(httpError(result, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
  guard case .transport(let urlError, _) = error else {
    throw TLSFixtureError(description: "expected a transport error, got \(error)")
  }
  return urlError
}

/// Runs `body` with a `TLSServer` running `script(certificate)` and serving a new certificate
/// for localhost and 127.0.0.1, and that certificate; stops the server afterwards.
private func withScriptedServer<T>(
  _ script: @escaping @Sendable (TestCertificate) -> String,
  _ body: (TLSServer, TestCertificate) async throws -> T
) async throws -> T {
  try await withDirectory { directory in
    let certificate = try await offThePool {
      Result {
        try TestCertificate.make(
          commonName: "localhost", alternativeNames: "DNS:localhost,IP:127.0.0.1", in: directory)
      }
    }.get()
    let server = try await offThePool {
      Result { try TLSServer(serving: certificate, script: script(certificate)) }
    }
    .get()
    defer { server.stop() }
    return try await body(server, certificate)
  }
}

/// Runs `body` with a new temporary directory, removed afterwards.
private func withDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
  let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
    "SocketTLS-\(UUID().uuidString)")
  try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  defer { try? FileManager.default.removeItem(at: directory) }
  return try await body(directory)
}

/// Makes a self-signed certificate for `alternativeNames`, serves it with a `TLSFileServer`,
/// and runs `body` with the server and the certificate's PEM.
private func withFileServer<T>(
  alternativeNames: String = "DNS:localhost,IP:127.0.0.1", _ body: (TLSServer, Data) async throws -> T
) async throws -> T {
  _ = loopbackBypassesProxy
  return try await withDirectory { directory in
    let started: Result<(TLSServer, Data), any Error> = await offThePool {
      Result {
        let certificate = try TestCertificate.make(
          commonName: "localhost", alternativeNames: alternativeNames, in: directory)
        return (try TLSFileServer.start(serving: certificate), try Data(contentsOf: certificate.certificate))
      }
    }
    let (server, pem) = try started.get()
    defer { server.stop() }
    return try await body(server, pem)
  }
}

/// An HTTPS server on 127.0.0.1 (python3's `ssl`, a thread per connection; a `TLSServer` with
/// its own program) that answers `GET /bytes/N` with N bytes of `body(N)` and a `PUT` with
/// "received N", and records each request line and its `User-Agent`. It exits when its
/// standard input closes.
enum TLSFileServer {
  static let script = """
    import fcntl, os, socket, ssl, struct, sys, termios, threading, time
    \(TLSServer.lockedPrint)
    def wait_delivered(sock):
        # Until the peer has acknowledged every byte sent: on loopback, until they are in its
        # socket. `sendall` returning means only that the kernel took them, and under load the
        # delivery can come later (CI under ThreadSanitizer once read one record of two).
        deadline = time.time() + 20
        while time.time() < deadline:
            left = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\\0\\0\\0\\0"))[0]
            if left == 0:
                return
            time.sleep(0.001)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[1], sys.argv[2])
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    connections = 0
    def control():
        while sys.stdin.readline():
            print("connections", connections, flush=True)
        os._exit(0)
    threading.Thread(target=control, daemon=True).start()
    block = bytes(i % 251 for i in range(251 * 1024))
    def serve(raw):
        try:
            raw.settimeout(30)
            with context.wrap_socket(raw, server_side=True) as tls:
                head = b""
                while b"\\r\\n\\r\\n" not in head:
                    chunk = tls.recv(65536)
                    if not chunk:
                        return
                    head += chunk
                head, rest = head.split(b"\\r\\n\\r\\n", 1)
                lines = head.split(b"\\r\\n")
                fields = dict((l.split(b":", 1)[0].strip().lower(), l.split(b":", 1)[1].strip()) for l in lines[1:])
                print("request", lines[0].decode("latin-1"), "|", fields.get(b"user-agent", b"").decode("latin-1"), flush=True)
                method, path = lines[0].split(b" ")[0:2]
                if method == b"PUT" and path == b"/slam":
                    # Gone without a word, the body unread: the kernel resets the connection.
                    print("slammed", flush=True)
                    return
                if method == b"PUT" and path == b"/early":
                    # An answer before the body, then the connection held open, nothing read.
                    tls.sendall(b"HTTP/1.1 413 Payload Too Large\\r\\nContent-Length: 9\\r\\nConnection: close\\r\\n\\r\\ntoo large")
                    print("answered early", flush=True)
                    time.sleep(60)
                    return
                if method == b"PUT" and path == b"/continue":
                    # An interim answer at once; the body is read after a pause, so the client's
                    # send is waiting on a full buffer when the interim answer is there to read.
                    tls.sendall(b"HTTP/1.1 100 Continue\\r\\n\\r\\n")
                    time.sleep(0.5)
                if method == b"PUT":
                    length = int(fields.get(b"content-length", b"0"))
                    received = len(rest)
                    while received < length:
                        chunk = tls.recv(65536)
                        if not chunk:
                            break
                        received += len(chunk)
                    body = b"received %d" % received
                    tls.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n%s" % (len(body), body))
                    return
                if path == b"/planted":
                    # A 2-byte answer and a whole second response after it, in one TLS record,
                    # on a connection held open: a client that reused it would read "stale".
                    tls.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok"
                        + b"HTTP/1.1 200 OK\\r\\nContent-Length: 5\\r\\n\\r\\nstale")
                    while tls.recv(65536):
                        print("request on the planted connection", flush=True)
                    return
                if path == b"/two-records":
                    # The answer in one TLS record, then a second response in a record of its
                    # own, both in the client's socket before it reads ("sent" says when).
                    tls.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok")
                    tls.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 5\\r\\n\\r\\nstale")
                    wait_delivered(tls)
                    print("two records sent", flush=True)
                    while tls.recv(65536):
                        pass
                    return
                size = int(path.rsplit(b"/", 1)[1])
                tls.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" % size)
                sent = 0
                while sent < size:
                    n = min(len(block), size - sent)
                    tls.sendall(block[:n])
                    sent += n
        except (OSError, ValueError) as error:
            print("failed", error, flush=True)
        finally:
            raw.close()
    print("port", listener.getsockname()[1], flush=True)
    while True:
        raw, _ = listener.accept()
        connections += 1
        threading.Thread(target=serve, args=(raw,), daemon=True).start()
    """

  /// The body of `GET /bytes/<size>`: bytes `i % 251`, restarting every 251 KiB.
  static func body(_ size: Int) -> Data {
    let block = (0..<(251 * 1024)).map { UInt8($0 % 251) }
    var data = Data(capacity: size)
    while data.count < size { data.append(contentsOf: block.prefix(size - data.count)) }
    return data
  }

  /// Starts the server with `certificate`; returns once it listens (at most 30 s).
  ///
  /// Blocks the calling thread: call it through `offThePool`.
  static func start(serving certificate: TestCertificate) throws -> TLSServer {
    try TLSServer(serving: certificate, script: script)
  }
}

extension TLSServer {
  /// The requests that got through the handshake so far: "LINE | USER-AGENT".
  ///
  /// The server prints a request line before it answers, but the line reaches this process
  /// through a pipe that a thread reads, which can lag behind the answer (under AddressSanitizer
  /// an upload's line was not there yet when its response was): when `count` lines are expected,
  /// it waits for them, at most 10 s.
  func requests(expecting count: Int = 0) -> [String] {
    func lines() -> [String] {
      output.all.filter { $0.hasPrefix("request ") }.map { String($0.dropFirst("request ".count)) }
    }
    let end = ContinuousClock.now + .seconds(10)
    while true {
      let seen = output.count
      let found = lines()
      guard found.count < count, ContinuousClock.now < end else { return found }
      // Returns when a line comes after the `seen` ones (or at `end`).
      _ = output.first(from: seen, withPrefix: "", timeout: end - ContinuousClock.now)
    }
  }
}

/// A TCP listener on 127.0.0.1 that accepts one connection and reads what the client sends,
/// but never answers: a TLS handshake with it waits for a ServerHello that never comes.
final class SilentListener: @unchecked Sendable {
  // Safety of `@unchecked Sendable`: `helloArrived` and `closed` are read and written only while
  // `condition` is locked; `port` and `listener` are constants.
  let port: Int
  private let listener: Int32
  private let condition = NSCondition()
  private var helloArrived = false
  private var closed = false

  init() throws {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard fd >= 0, bound == 0, named == 0, listen(fd, 4) == 0 else {
      throw TLSFixtureError(description: "could not listen (errno \(errno))")
    }
    listener = fd
    port = Int(UInt16(bigEndian: address.sin_port))
    let thread = Thread { [self] in serve() }
    thread.start()
  }

  private func serve() {
    let connection = accept(listener, nil, nil)
    guard connection >= 0 else { return }
    defer { Glibc.close(connection) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    var first = true
    while true {
      let count = recv(connection, &buffer, buffer.count, 0)
      // A TLS record of type 22 (handshake): the ClientHello.
      if first, count > 0, buffer[0] == 22 { update { $0.helloArrived = true } }
      first = false
      if count <= 0 { break }
    }
    update { $0.closed = true }
  }

  private func update(_ change: (SilentListener) -> Void) {
    condition.lock()
    change(self)
    condition.broadcast()
    condition.unlock()
  }

  /// Waits, at most `timeout` seconds, until a ClientHello has arrived.
  func awaitClientHello(timeout: TimeInterval) -> Bool { waitUntil(timeout) { $0.helloArrived } }

  /// Waits, at most `timeout` seconds, until the client has closed the connection.
  func awaitClose(timeout: TimeInterval) -> Bool { waitUntil(timeout) { $0.closed } }

  private func waitUntil(_ timeout: TimeInterval, _ isDone: (SilentListener) -> Bool) -> Bool {
    let end = Date().addingTimeInterval(timeout)
    condition.lock()
    defer { condition.unlock() }
    while !isDone(self) {
      if !condition.wait(until: end) { return isDone(self) }
    }
    return true
  }

  func close() {
    shutdown(listener, Int32(SHUT_RDWR))
    Glibc.close(listener)
  }
}
