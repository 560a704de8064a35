import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// TLS client authentication over the socket transport (`Configuration.clientCertificate`)
/// against a python3 `ssl` server that requires a client certificate signed by an authority it
/// is given: accepted, rejected, required, unusable, and refused before sending where
/// `URLSession` would carry the request. Over TLS 1.3 and TLS 1.2, where the server's verdict
/// arrives at different moments (after the handshake, when the client reads; during it).
@Suite(
  "Client certificates", .timeLimit(.minutes(1)),
  .enabled(if: TLSTools.available, "needs openssl and python3 on PATH to make certificates and serve them"),
  .enabled(if: OpenSSL.loaded != nil, "needs OpenSSL 3 (libssl.so.3) to load"))
struct ClientCertificateTests {
  /// What a case has: the server, the PEM the client trusts it with, and a client identity
  /// (`leaf`, signed by `authority`) with its files.
  private struct Setup {
    let server: TLSServer
    let serverCertificate: Data
    let authority: TestCertificate
    let leaf: TestCertificate
    let directory: URL

    /// The client certificate made of the leaf's certificate and `key` (the leaf's own by default).
    func identity(key: URL? = nil) throws -> HTTPClient.ClientCertificate {
      HTTPClient.ClientCertificate(
        certificateChain: try Data(contentsOf: leaf.certificate),
        privateKey: try Data(contentsOf: key ?? leaf.key))
    }

    func client(
      identity: HTTPClient.ClientCertificate?, engine: HTTPClient.Engine = .automatic
    ) -> HTTPClient {
      var configuration = HTTPClient.Configuration(retryPolicy: quickRetries(3))
      configuration.serverTrust = .init(additionalCertificates: [serverCertificate])
      configuration.clientCertificate = identity
      configuration.engine = engine
      return HTTPClient(baseURL: server.baseURL(), configuration: configuration)
    }

    func connections() async throws -> Int {
      let server = self.server
      return try await offThePool { Result { try server.connections() } }.get()
    }
  }

  /// Makes an authority and a leaf it signed (the client's), a server certificate of its own,
  /// and a server that trusts `trustedAuthority(authority, serverCertificate)` for clients.
  private func withServer<T>(
    tls12: Bool = false,
    trusting trustedAuthority: @escaping @Sendable (URL, URL) -> URL = { authority, _ in authority },
    _ body: (Setup) async throws -> T
  ) async throws -> T {
    _ = loopbackBypassesProxy
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "ClientCertificate-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let serverDirectory = directory.appendingPathComponent("server")
    try FileManager.default.createDirectory(at: serverDirectory, withIntermediateDirectories: true)
    let (authority, leaf, serverCertificate) = try await offThePool {
      Result {
        let (authority, leaf) = try TLSFixtures.chain(in: directory)
        let serverCertificate = try TestCertificate.make(
          commonName: "localhost", alternativeNames: "DNS:localhost,IP:127.0.0.1", in: serverDirectory)
        return (authority, leaf, serverCertificate)
      }
    }.get()
    let trusted = trustedAuthority(authority.certificate, serverCertificate.certificate)
    let script = TLSServer.script(clientsSignedBy: trusted.path, maximumTLS12: tls12)
    let server = try await offThePool { Result { try TLSServer(serving: serverCertificate, script: script) } }
      .get()
    defer { server.stop() }
    return try await body(
      Setup(
        server: server, serverCertificate: try Data(contentsOf: serverCertificate.certificate),
        authority: authority,
        leaf: leaf, directory: directory))
  }

  @Test(arguments: [false, true])
  func aCertificateSignedByTheAuthorityTheServerTrustsIsAccepted(tls12: Bool) async throws {
    try await withServer(tls12: tls12) { setup in
      let client = setup.client(identity: try setup.identity())
      let response = try await client.get("whoami").value
      #expect(response.statusCode == 200)
      #expect(response.text == "hello localhost", "the server saw the leaf's common name")
      let second = try await client.get("again").value
      #expect(second.text == "hello localhost", "and on a second connection")
    }
  }

  @Test(arguments: [false, true])
  func aCertificateTheServerDoesNotTrustIsRejectedOnce(tls12: Bool) async throws {
    // The server trusts only its own certificate as an authority for clients.
    try await withServer(tls12: tls12, trusting: { _, own in own }) { setup in
      let client = setup.client(identity: try setup.identity())
      let error = try transportError(await outcome(of: client.get("whoami")).result)
      #expect(error.code == .clientCertificateRejected, "\(error.localizedDescription)")
      #expect(
        error.localizedDescription.hasPrefix("The server rejected the client certificate: "),
        "\(error.localizedDescription)")
      #expect(error.localizedDescription.contains("unknown ca"), "\(error.localizedDescription)")
      #expect(try await setup.connections() == 1, "not retried: \(setup.server.log)")
    }
  }

  /// A leaf issued by an intermediate authority, which `authority` (the root the server
  /// trusts) signed; returns the leaf and the intermediate's PEM.
  ///
  /// Blocks the calling thread: call it through `offThePool`.
  private static func leafThroughAnIntermediate(
    signedBy authority: TestCertificate, in directory: URL
  ) throws -> (leaf: TestCertificate, intermediate: URL) {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    try Data(
      """
      [intermediate]
      basicConstraints = critical, CA:TRUE, pathlen:0
      keyUsage = critical, keyCertSign, cRLSign
      subjectKeyIdentifier = hash
      authorityKeyIdentifier = keyid
      [leaf]
      basicConstraints = CA:FALSE
      keyUsage = critical, digitalSignature, keyEncipherment
      extendedKeyUsage = clientAuth
      subjectKeyIdentifier = hash
      authorityKeyIdentifier = keyid

      """.utf8
    ).write(to: directory.appendingPathComponent("extensions.cnf"))
    let steps: [[String]] = [
      [
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=Test Intermediate", "-keyout",
        "@intermediate.key",
        "-out", "@intermediate.csr",
      ],
      [
        "x509", "-req", "-in", "@intermediate.csr", "-CA", authority.certificate.path, "-CAkey",
        authority.key.path, "-CAcreateserial", "-days", "1", "-out", "@intermediate.pem", "-extfile",
        "@extensions.cnf", "-extensions", "intermediate",
      ],
      [
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=through an intermediate", "-keyout",
        "@leaf.key", "-out", "@leaf.csr",
      ],
      [
        "x509", "-req", "-in", "@leaf.csr", "-CA", "@intermediate.pem", "-CAkey", "@intermediate.key",
        "-CAcreateserial", "-days", "1", "-out", "@leaf.pem", "-extfile", "@extensions.cnf", "-extensions",
        "leaf",
      ],
    ]
    for step in steps { try TLSFixtures.openssl(step, in: directory) }
    return (
      TestCertificate(
        certificate: directory.appendingPathComponent("leaf.pem"),
        key: directory.appendingPathComponent("leaf.key")),
      directory.appendingPathComponent("intermediate.pem")
    )
  }

  /// A leaf issued by an intermediate authority, the server trusting only the root: presented
  /// with the intermediate (the chain as a PEM file holds it, leaf first) the certificate is
  /// accepted; the leaf alone is rejected, as the server cannot link it to the root. curl with the
  /// same files in the same run gets the same two answers.
  @Test(arguments: [false, true])
  func aLeafIssuedByAnIntermediateIsAcceptedWithTheIntermediateAndRejectedWithout(tls12: Bool)
    async throws
  {
    try await withServer(tls12: tls12) { setup in
      let (leaf, intermediate) = try await offThePool {
        Result {
          try Self.leafThroughAnIntermediate(
            signedBy: setup.authority, in: setup.directory.appendingPathComponent("intermediate"))
        }
      }.get()
      let leafPEM = try Data(contentsOf: leaf.certificate)
      let chainPEM = leafPEM + (try Data(contentsOf: intermediate))
      let key = try Data(contentsOf: leaf.key)

      let withChain = setup.client(
        identity: HTTPClient.ClientCertificate(certificateChain: chainPEM, privateKey: key))
      let response = try await withChain.get("whoami").value
      #expect(response.statusCode == 200 && response.text == "hello through an intermediate")

      let leafOnly = setup.client(
        identity: HTTPClient.ClientCertificate(certificateChain: leafPEM, privateKey: key))
      let error = try transportError(await outcome(of: leafOnly.get("whoami")).result)
      #expect(error.code == .clientCertificateRejected, "\(error.localizedDescription)")
      #expect(error.localizedDescription.contains("unknown ca"), "\(error.localizedDescription)")

      // curl, the reference client, with the same files.
      guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else { return }
      let serverPEM = setup.directory.appendingPathComponent("server-trust.pem")
      try setup.serverCertificate.write(to: serverPEM)
      let chainFile = setup.directory.appendingPathComponent("chain.pem")
      try chainPEM.write(to: chainFile)
      let url = setup.server.baseURL().absoluteString + "whoami"
      let (curlWithChain, curlLeafOnly) = try await offThePool {
        Result {
          let run = { (certificate: URL) in
            try ChildProcess.run(
              "/usr/bin/curl",
              ["-sS", "--cacert", serverPEM.path, "--cert", certificate.path, "--key", leaf.key.path, url],
              mergingStandardError: true, timeout: .seconds(30))
          }
          return (try run(chainFile), try run(leaf.certificate))
        }
      }.get()
      #expect(curlWithChain.isSuccess && curlWithChain.standardOutputText == "hello through an intermediate")
      #expect(!curlLeafOnly.isSuccess, "curl: \(curlLeafOnly.standardOutputText)")
    }
  }

  @Test func withoutACertificateTheServersDemandIsNamed() async throws {
    try await withServer { setup in
      let client = setup.client(identity: nil)
      let error = try transportError(await outcome(of: client.get("whoami")).result)
      #expect(error.code == .clientCertificateRequired, "\(error.localizedDescription)")
      #expect(
        error.localizedDescription.hasPrefix(
          "The server requires a client certificate (HTTPClient.Configuration.clientCertificate): "),
        "\(error.localizedDescription)")
      #expect(try await setup.connections() == 1, "not retried: \(setup.server.log)")
    }
  }

  @Test func aKeyThatDoesNotMatchTheCertificateFailsBeforeConnecting() async throws {
    try await withServer { setup in
      let client = setup.client(identity: try setup.identity(key: setup.authority.key))
      let error = try transportError(await outcome(of: client.get("whoami")).result)
      #expect(error.code == .secureConnectionFailed)
      #expect(
        error.localizedDescription.hasPrefix("The client certificate key does not match the certificate"),
        "\(error.localizedDescription)")
      #expect(setup.server.log.allSatisfy { !$0.hasPrefix("request") }, "nothing sent: \(setup.server.log)")
    }
  }

  @Test func anEncryptedKeyIsRefusedNotPromptedFor() async throws {
    try await withServer { setup in
      let encrypted = setup.directory.appendingPathComponent("encrypted.key")
      try await offThePool {
        Result {
          try TLSFixtures.openssl(
            [
              "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-passout", "pass:secret", "-in", setup.leaf.key.path,
              "-out", encrypted.path,
            ], in: setup.directory)
        }
      }.get()
      #expect(
        String(decoding: try Data(contentsOf: encrypted), as: UTF8.self).contains("ENCRYPTED PRIVATE KEY"))
      let client = setup.client(identity: try setup.identity(key: encrypted))
      let error = try transportError(await outcome(of: client.get("whoami")).result)
      #expect(error.code == .secureConnectionFailed)
      #expect(
        error.localizedDescription.hasPrefix(
          "The client certificate key is not an unencrypted PEM private key"),
        "\(error.localizedDescription)")
    }
  }

  @Test func aChainWithoutACertificateIsNamed() async throws {
    try await withServer { setup in
      let client = setup.client(
        identity: HTTPClient.ClientCertificate(
          certificateChain: Data("not a certificate".utf8), privateKey: try Data(contentsOf: setup.leaf.key)))
      let error = try transportError(await outcome(of: client.get("whoami")).result)
      #expect(error.code == .secureConnectionFailed)
      #expect(
        error.localizedDescription
          == "The client certificate has no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
      )
    }
  }

  /// `URLSession` cannot present the certificate: a request it would carry fails unsent rather
  /// than going without it.
  @Test func aRequestThatURLSessionWouldCarryFailsUnsent() async throws {
    try await withServer { setup in
      let client = setup.client(identity: try setup.identity(), engine: .urlSession)
      let error = try transportError(await outcome(of: client.get("whoami")).result)
      #expect(error.code == .secureConnectionFailed)
      #expect(
        error.localizedDescription.hasPrefix(
          "the client has a client certificate, which only the socket transport presents, and the socket transport cannot serve this request"
        ), "\(error.localizedDescription)")
      #expect(try await setup.connections() == 0, "not sent")
    }
  }
}
