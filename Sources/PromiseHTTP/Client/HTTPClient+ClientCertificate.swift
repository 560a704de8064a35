import Foundation

extension HTTPClient {
  /// A certificate and its private key that the client presents to an HTTPS server that asks
  /// for one (TLS client authentication, "mutual TLS"): `Configuration.clientCertificate`.
  ///
  /// Only the socket transport can present it (FoundationNetworking on Linux has no way to), so:
  /// - a request over HTTPS goes over the socket transport under the `.automatic` engine;
  /// - an HTTPS request that would go through `URLSession` (a proxy other than `http://` or SOCKS5, the `Engine.urlSession`
  ///   engine, or no loadable OpenSSL 3) fails with `URLError.secureConnectionFailed` before
  ///   anything is sent, instead of going without the certificate;
  /// - a server that does not ask for a certificate never sees it.
  ///
  /// Both are read on the client's first HTTPS request; a certificate or key that cannot be
  /// read, or a key that does not match the certificate, fails every HTTPS request of the client
  /// with `URLError.secureConnectionFailed` naming the problem.
  public struct ClientCertificate: Sendable, Hashable {
    /// The client's certificate as PEM (`-----BEGIN CERTIFICATE-----`), followed by any
    /// intermediate certificates the server needs to link it to an authority it trusts.
    public var certificateChain: Data
    /// The certificate's private key, as unencrypted PEM.
    ///
    /// PKCS #8 (`-----BEGIN PRIVATE KEY-----`), or the RSA or EC forms. An encrypted key is
    /// refused, never prompted for.
    public var privateKey: Data

    /// Creates a client certificate from PEM data.
    ///
    /// - Parameters:
    ///   - certificateChain: The client's certificate, then any intermediates, as PEM.
    ///   - privateKey: The certificate's private key, as unencrypted PEM.
    public init(certificateChain: Data, privateKey: Data) {
      self.certificateChain = certificateChain
      self.privateKey = privateKey
    }
  }
}
