import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// HTTPS to a loopback server the test starts (python3's `ssl`), with certificates it makes
/// (`openssl`): TLS failures are typed, name the certificate problem, and are not retried.
///
/// Skipped only where `openssl` or `python3` is missing; `.ci/run` fails without them, so CI runs
/// these tests.
@Suite(
  "TLS", .timeLimit(.minutes(1)),
  .enabled(if: TLSTools.available, "needs openssl and python3 on PATH to make a certificate and serve it"))
struct TLSTests {
  /// The codes a TLS failure can have; none is worth a retry.
  static let tlsCodes: Set<URLError.Code> = [
    .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
    .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected,
    .clientCertificateRequired,
  ]

  @Test(arguments: ["127.0.0.1", "localhost"])
  func aSelfSignedCertificateIsUntrustedNamedAndNotRetried(host: String) async throws {
    try await withTLSServer { server in
      // GET with three attempts allowed: a retryable failure would be sent three times.
      let client = HTTPClient(
        baseURL: server.baseURL(host: host), configuration: .init(retryPolicy: quickRetries(3)))
      let (result, elapsed) = await outcome(of: client.get("path"))
      report("self-signed certificate at \(host)", result, elapsed)
      let (error, urlError) = try transportFailure(result)
      let url = error.url
      #expect(urlError.code == .serverCertificateUntrusted)
      #expect(urlError.localizedDescription.hasPrefix("SSL certificate problem: self"))
      #expect(url == URL(string: "https://\(host):\(server.port)/path"))
      #expect(
        error.description.contains("(server certificate untrusted: SSL certificate problem: self"),
        "\(error.description)")
      #expect(error.description.hasSuffix(" for https://\(host):\(server.port)/path"))
      let connections = try await offThePool { Result { try server.connections() } }.get()
      #expect(connections == 1, "\(server.log)")
    }
  }

  @Test func aCertificateForAnotherHostIsRefused() async throws {
    // libcurl checks the chain before the name, so an untrusted certificate for another host
    // fails as untrusted; with a trusted one the message names the mismatch (see the next test).
    try await withTLSServer(commonName: "other.example", alternativeNames: "DNS:other.example") { server in
      let client = HTTPClient(baseURL: server.baseURL(), configuration: .init(retryPolicy: quickRetries(3)))
      let (result, elapsed) = await outcome(of: client.get("x"))
      report("certificate for other.example at 127.0.0.1", result, elapsed)
      let (_, urlError) = try transportFailure(result)
      #expect(urlError.code == .serverCertificateUntrusted)
      #expect(urlError.localizedDescription.hasPrefix("SSL certificate problem:"))
      let connections = try await offThePool { Result { try server.connections() } }.get()
      #expect(connections == 1, "\(server.log)")
    }
  }

  @Test func aHostNameMismatchIsUntrustedAndNamed() throws {
    // The error FoundationNetworking 6.3.1 (libcurl 7.88, OpenSSL 3.0) gave for a trusted
    // certificate for other.example requested at 127.0.0.1, measured with the certificate in
    // the system bundle; a test process cannot trust a certificate of its own on Linux.
    let measured = URLError(
      .unknown,
      userInfo: [
        NSLocalizedDescriptionKey:
          "SSL: no alternative certificate subject name matches target host name '127.0.0.1'"
      ])
    let error = HTTPError.transportFailure(measured, url: URL(string: "https://127.0.0.1:8443/x"))
    let (_, urlError) = try transportFailure(Result<Void, any Error>.failure(error))
    #expect(urlError.code == .serverCertificateUntrusted)
    #expect(
      error.description
        == "HTTP transport error -1202 (server certificate untrusted: SSL: no alternative certificate subject name"
        + " matches target host name '127.0.0.1') for https://127.0.0.1:8443/x")
  }

  @Test func credentialsInTheURLAreNotInTheError() async throws {
    try await withTLSServer { server in
      let base = try #require(URL(string: "https://alice:pa55word@127.0.0.1:\(server.port)/api/"))
      let client = HTTPClient(baseURL: base, configuration: .init(retryPolicy: .none))
      let (result, _) = await outcome(
        of: client.get("items", query: [URLQueryItem(name: "token", value: "s3cret")]))
      let (error, urlError) = try transportFailure(result)
      #expect(urlError.code == .serverCertificateUntrusted)
      var dumped = ""
      dump(error, to: &dumped)
      for text in [error.description, String(reflecting: error), error.localizedDescription, dumped] {
        #expect(!text.contains("pa55word"), "\(text)")
        #expect(!text.contains("alice"), "\(text)")
      }
      #expect(error.description.contains("SSL certificate problem"))
    }
  }

  @Test func urlsInTheMessageLoseTheirCredentials() throws {
    let message = "proxy https://bob:pa55word@proxy.example:3128/x?token=s3cret refused: SSL connect error"
    let error = HTTPError.transportFailure(
      URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: message]),
      url: URL(string: "https://bob:pa55word@api.example/x"))
    var dumped = ""
    dump(error, to: &dumped)
    for text in [error.description, String(reflecting: error), error.localizedDescription, dumped] {
      #expect(!text.contains("pa55word"), "\(text)")
      #expect(!text.contains("s3cret"), "\(text)")
    }
    #expect(
      error.description
        == "HTTP transport error -1200 (secure connection failed: proxy https://proxy.example:3128/x?<redacted>"
        + " refused: SSL connect error) for https://api.example/x")
  }

  @Test func httpsToAPlainHTTPServerIsASecureConnectionFailure() async throws {
    try await withServer({ router in
      router.on("GET", "/x") { _ in .respond(.text("plain")) }
    }) { server in
      var components = try #require(URLComponents(url: server.baseURL, resolvingAgainstBaseURL: false))
      components.scheme = "https"
      let client = HTTPClient(
        baseURL: try #require(components.url), configuration: .init(retryPolicy: quickRetries(3)))
      let (result, elapsed) = await outcome(of: client.get("x"))
      report("https to a plain HTTP server", result, elapsed)
      let (_, urlError) = try transportFailure(result)
      #expect(urlError.code == .secureConnectionFailed, "\(urlError.localizedDescription)")
      #expect(!urlError.localizedDescription.isEmpty)
    }
  }

  @Test func transfersOverHTTPSCheckTheCertificateAsRequestsDo() async throws {
    // Docs/Transfers.md, "HTTPS and certificates": a download, an upload and a stream over HTTPS
    // (the socket transport, or URLSession where OpenSSL 3 cannot be loaded) check the system's
    // trust store, and fail on a self-signed certificate as `get` does, the download leaving no file.
    try await withTLSServer { server in
      let client = HTTPClient(baseURL: server.baseURL(), configuration: .init(retryPolicy: quickRetries(3)))
      let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
        "TLSTransfers-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: directory) }
      let file = directory.appendingPathComponent("take.mp4")
      let (download, _) = await outcome(of: client.download("take.mp4", to: file))
      #expect(try transportFailure(download).1.code == .serverCertificateUntrusted)
      #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
      let (upload, _) = await outcome(of: client.upload(.data(Data("take".utf8)), to: "takes", method: .put))
      #expect(try transportFailure(upload).1.code == .serverCertificateUntrusted)
      let (stream, _) = await outcome(of: client.stream("events"))
      #expect(try transportFailure(stream).1.code == .serverCertificateUntrusted)
      let connections = try await offThePool { Result { try server.connections() } }.get()
      #expect(connections == 3, "one handshake each, none retried: \(server.log)")
    }
  }

  @Test func tlsFailuresAreNotRetriedByDefault() {
    #expect(RetryPolicy.default.retryableErrorCodes.isDisjoint(with: Self.tlsCodes))
    #expect(!RetryPolicy.default.retryableErrorCodes.contains(.unknown))
  }
}

/// Returns the error of a rejected outcome and its `URLError`; throws unless it is a transport error.
private func transportFailure<T>(
  _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
) throws -> (HTTPError, URLError) {
  let error = try #require(httpError(result, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
  guard case .transport(let urlError, _) = error else {
    throw TLSFixtureError(description: "expected a transport error, got \(error)")
  }
  return (error, urlError)
}
