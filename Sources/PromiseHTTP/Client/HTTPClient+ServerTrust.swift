import Foundation

extension HTTPClient {
  /// What a client trusts in an HTTPS server's certificate beyond the system's trust store:
  /// `Configuration.serverTrust`.
  ///
  /// The server's certificate chain is always verified against the system's trust store and
  /// the host's name; this adds authorities of your own (a private CA) and, per host, the keys
  /// the server must have (pins). Only the socket transport can honour either, so:
  /// - a request over HTTPS goes over the socket transport under the `.automatic` engine;
  /// - a request to a pinned host that would go through `URLSession` (a proxy other than `http://` or SOCKS5, the
  ///   `Engine.urlSession` engine, or no loadable OpenSSL 3) fails with
  ///   `URLError.secureConnectionFailed` before anything is sent, instead of going unpinned;
  /// - a request through `URLSession` to a host whose certificate only an additional authority
  ///   vouches for fails as untrusted, as it would without them.
  public struct ServerTrust: Sendable, Hashable {
    /// Certificates of authorities trusted beside the system's, as PEM.
    ///
    /// Each value is PEM text with one or more `-----BEGIN CERTIFICATE-----` blocks. A value with no certificate in it fails every
    /// HTTPS request of the client with `URLError.secureConnectionFailed`.
    public var additionalCertificates: [Data]
    /// For each host name (as written in URLs, compared without case), the keys one of which
    /// the server's certificate must carry: each the SHA-256 digest of the certificate's
    /// DER-encoded SubjectPublicKeyInfo (curl's `--pinnedpubkey sha256//…`, base64-decoded).
    ///
    /// Make one with
    /// `openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary`.
    /// A server whose key is not among them fails with `URLError.serverCertificateUntrusted`.
    /// Hosts not named are not pinned.
    public var publicKeyPins: [String: Set<Data>]

    /// Creates a trust setting; with no arguments, the system's trust store alone.
    ///
    /// - Parameters:
    ///   - additionalCertificates: PEM certificates of authorities to trust as well.
    ///   - publicKeyPins: Per host, the SHA-256 digests of the keys its certificate may have.
    public init(additionalCertificates: [Data] = [], publicKeyPins: [String: Set<Data>] = [:]) {
      self.additionalCertificates = additionalCertificates
      self.publicKeyPins = publicKeyPins
    }

    /// The system's trust store alone: the default.
    public static let system = ServerTrust()

    /// The pins of `host`, if it is pinned.
    func pins(for host: String) -> Set<Data>? {
      let host = host.lowercased()
      return publicKeyPins.first { $0.key.lowercased() == host }?.value
    }
  }
}
