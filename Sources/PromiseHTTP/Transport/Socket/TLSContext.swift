import Foundation
import Promises

#if canImport(Glibc)
  import Glibc

  /// A client's TLS set-up for the socket transport (an OpenSSL `SSL_CTX`): TLS 1.2 or later,
  /// peers verified against the system's trust store and the client's additional authorities,
  /// and the client's key pins.
  ///
  /// Made once per client, on its first HTTPS transfer (`TLSContextCache`), and shared by its
  /// connections.
  final class TLSContext: @unchecked Sendable {
    // Safety of `@unchecked Sendable`: `context` is configured in `init`, before the object is
    // shared, and never changed afterwards; OpenSSL 3 lets many threads make `SSL` objects from
    // one `SSL_CTX` and verify against its `X509_STORE` at once (the store locks itself).
    // `pins` and `library` are constants.
    let library: OpenSSL
    let context: OpaquePointer
    let trust: HTTPClient.ServerTrust
    /// The size of OpenSSL's read buffer, which read ahead fills from the socket in one call.
    static let readBufferLength = 64 * 1024

    /// Sets up a context trusting the system's store and `trust`'s certificates, presenting
    /// `clientCertificate` to a server that asks for one.
    ///
    /// - Throws: `URLError.secureConnectionFailed` when OpenSSL 3 cannot be loaded, a
    ///   certificate of `trust` cannot be read, or `clientCertificate` cannot be used.
    init(trust: HTTPClient.ServerTrust, clientCertificate: HTTPClient.ClientCertificate? = nil)
      throws(URLError)
    {
      let library = try OpenSSL.shared.get()
      library.ERR_clear_error()
      guard let context = library.SSL_CTX_new(library.TLS_client_method()) else {
        throw Self.failure(library, "Could not create a TLS context")
      }
      self.library = library
      self.context = context
      self.trust = trust
      _ = library.SSL_CTX_ctrl(
        context, OpenSSL.SSL_CTRL_SET_MIN_PROTO_VERSION, OpenSSL.TLS1_2_VERSION, nil)
      _ = library.SSL_CTX_ctrl(
        context, OpenSSL.SSL_CTRL_MODE,
        OpenSSL.SSL_MODE_ENABLE_PARTIAL_WRITE | OpenSSL.SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, nil)
      // Read ahead: OpenSSL reads whatever the socket holds into its own buffer, several
      // records in one `read`, rather than a record's 5-byte header and then its body in two.
      _ = library.SSL_CTX_ctrl(context, OpenSSL.SSL_CTRL_SET_READ_AHEAD, 1, nil)
      library.SSL_CTX_set_default_read_buffer_len(context, Self.readBufferLength)
      // A server that closes without a close_notify (common with `Connection: close`) ends the
      // stream as a closed socket does; HTTP's own framing tells a cut-off body.
      _ = library.SSL_CTX_set_options(context, OpenSSL.SSL_OP_IGNORE_UNEXPECTED_EOF)
      library.SSL_CTX_set_verify(context, OpenSSL.SSL_VERIFY_PEER, nil)
      guard library.SSL_CTX_set_default_verify_paths(context) == 1 else {
        throw Self.failure(library, "Could not load the system's trusted certificates")
      }
      let store = library.SSL_CTX_get_cert_store(context)
      for (index, pem) in trust.additionalCertificates.enumerated() {
        let certificates = try Self.certificates(inPEM: pem, library: library, index: index)
        defer { certificates.forEach { library.X509_free($0) } }
        for certificate in certificates {
          // Adding one that is there already fails harmlessly.
          _ = library.X509_STORE_add_cert(store, certificate)
        }
      }
      if let clientCertificate {
        try Self.use(clientCertificate, in: context, library: library)
      }
      library.ERR_clear_error()
    }

    /// Makes `context` present `identity`: its first certificate, the others as the chain, and
    /// its key, checked against the certificate.
    private static func use(
      _ identity: HTTPClient.ClientCertificate, in context: OpaquePointer, library: OpenSSL
    ) throws(URLError) {
      func refusal(_ what: String) -> URLError {
        let reasons = library.errorQueueText().map { " (\($0))" } ?? ""
        return URLError(
          .secureConnectionFailed,
          userInfo: [NSLocalizedDescriptionKey: "The client certificate \(what)\(reasons)"])
      }
      let chain: [OpaquePointer]
      do {
        chain = try certificates(inPEM: identity.certificateChain, library: library)
      } catch {
        throw URLError(
          .secureConnectionFailed,
          userInfo: [
            NSLocalizedDescriptionKey:
              "The client certificate has no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
          ])
      }
      defer { chain.forEach { library.X509_free($0) } }
      library.ERR_clear_error()
      guard library.SSL_CTX_use_certificate(context, chain[0]) == 1 else {
        throw refusal("cannot be used")
      }
      for intermediate in chain.dropFirst() {
        // `SSL_CTX_add1_chain_cert`: the context takes a reference of its own.
        guard
          library.SSL_CTX_ctrl(context, OpenSSL.SSL_CTRL_CHAIN_CERT, 1, UnsafeMutableRawPointer(intermediate))
            == 1
        else { throw refusal("chain cannot be used") }
      }
      let key: OpaquePointer? = identity.privateKey.withUnsafeBytes { bytes in
        guard let bio = library.BIO_new_mem_buf(bytes.baseAddress, Int32(clamping: bytes.count)) else {
          return nil
        }
        defer { _ = library.BIO_free(bio) }
        // An empty passphrase, not OpenSSL's default callback, which would prompt on a terminal
        // for an encrypted key: an encrypted key fails to read instead.
        return "".withCString { empty in
          library.PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: empty))
        }
      }
      guard let key else { throw refusal("key is not an unencrypted PEM private key") }
      defer { library.EVP_PKEY_free(key) }
      // `SSL_CTX_use_PrivateKey` checks the key against the certificate ("key values mismatch").
      guard library.SSL_CTX_use_PrivateKey(context, key) == 1, library.SSL_CTX_check_private_key(context) == 1
      else { throw refusal("key does not match the certificate, or cannot be used") }
    }

    deinit {
      library.SSL_CTX_free(context)
    }

    /// The certificates in `pem`, each to be freed with `X509_free`.
    static func certificates(inPEM pem: Data, library: OpenSSL, index: Int = 0) throws(URLError)
      -> [OpaquePointer]
    {
      let result: Result<[OpaquePointer], URLError> = pem.withUnsafeBytes { bytes in
        guard let bio = library.BIO_new_mem_buf(bytes.baseAddress, Int32(clamping: bytes.count)) else {
          return .failure(failure(library, "Could not read additional certificate \(index)"))
        }
        defer { _ = library.BIO_free(bio) }
        var certificates: [OpaquePointer] = []
        while let certificate = library.PEM_read_bio_X509(bio, nil, nil, nil) {
          certificates.append(certificate)
        }
        // The end of the data leaves an error on the queue.
        library.ERR_clear_error()
        guard !certificates.isEmpty else {
          return .failure(
            URLError(
              .secureConnectionFailed,
              userInfo: [
                NSLocalizedDescriptionKey:
                  "Additional trusted certificate \(index) has no PEM certificate (-----BEGIN CERTIFICATE-----) in it"
              ]))
        }
        return .success(certificates)
      }
      return try result.get()
    }

    /// The SHA-256 digest of the SubjectPublicKeyInfo of `certificate` (an `X509`), as pinned.
    static func publicKeyPin(of certificate: OpaquePointer, library: OpenSSL) -> Data? {
      guard let key = library.X509_get0_pubkey(certificate) else { return nil }
      let length = library.i2d_PUBKEY(key, nil)
      guard length > 0 else { return nil }
      var der = [UInt8](repeating: 0, count: Int(length))
      let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
        return library.i2d_PUBKEY(key, &cursor)
      }
      guard written == length else { return nil }
      return der.withUnsafeBytes { library.sha256($0) }
    }

    /// The pin of the first certificate in `pem` (for tests and tools).
    static func publicKeyPin(ofPEM pem: Data) throws(URLError) -> Data {
      let library = try OpenSSL.shared.get()
      let certificates = try certificates(inPEM: pem, library: library)
      defer { certificates.forEach { library.X509_free($0) } }
      guard let pin = publicKeyPin(of: certificates[0], library: library) else {
        throw failure(library, "Could not read the certificate's public key")
      }
      return pin
    }

    /// A `URLError.secureConnectionFailed` with `what` and OpenSSL's reasons.
    static func failure(_ library: OpenSSL, _ what: String) -> URLError {
      let reasons = library.errorQueueText().map { ": \($0)" } ?? ""
      return URLError(.secureConnectionFailed, userInfo: [NSLocalizedDescriptionKey: "\(what)\(reasons)"])
    }
  }

  /// One TLS connection (an OpenSSL `SSL`) over a connected socket of the socket transport.
  ///
  /// It never blocks: every call returns what OpenSSL wants next (to read, to write) and
  /// `SocketConnection` waits for it with its `poll` and wake-up pair, so that `stop()` ends a
  /// handshake, a read or a write at once.
  final class TLSStream: @unchecked Sendable {
    // Safety of `@unchecked Sendable`: `ssl` and the `var`s are used by one thread at a time:
    // the socket task's thread does the handshake, the sends and the reads in turn; an idle
    // connection is handed to the next task, or closed (`sendCloseNotify()`) by whichever thread
    // takes it out of the pool, under the pool's lock. `SocketConnection.stop()` from other
    // threads touches only the descriptors, never `ssl`. It is freed in `deinit`, when no one
    // holds the stream.
    let context: TLSContext
    let ssl: OpaquePointer
    let host: String
    /// The end or failure that stopped `readAvailable(into:)` after it had read some bytes; the
    /// same one thread reads and writes it.
    private var heldStep: Step?
    /// Bytes of an answer read while the request's body was being sent (`readAnswerEarly()`),
    /// handed out first by `readAvailable(into:)`; the same one thread reads and writes them.
    private var early: [UInt8] = []
    /// Whether the connection may still be closed with a close_notify.
    ///
    /// True once the handshake is done, until a TLS call fails (after a failure OpenSSL must
    /// not be asked to shut down) or the alert is sent. Used by one thread at a time (see above).
    private var closesCleanly = false

    /// Prepares a client connection to `host` over `socket`: SNI (for a name, not an address),
    /// the name or address the certificate must carry, ALPN `http/1.1`.
    init(context: TLSContext, socket: Int32, host: String) throws(URLError) {
      let library = context.library
      library.ERR_clear_error()
      guard let ssl = library.SSL_new(context.context) else {
        throw TLSContext.failure(library, "Could not create a TLS connection")
      }
      self.context = context
      self.ssl = ssl
      self.host = host
      guard library.SSL_set_fd(ssl, socket) == 1 else {
        throw TLSContext.failure(library, "Could not attach TLS to the socket")
      }
      if Self.isAddress(host) {
        guard library.X509_VERIFY_PARAM_set1_ip_asc(library.SSL_get0_param(ssl), host) == 1 else {
          throw TLSContext.failure(library, "Could not set the address to verify")
        }
      } else {
        let named = host.withCString { name in
          library.SSL_ctrl(
            ssl, OpenSSL.SSL_CTRL_SET_TLSEXT_HOSTNAME, OpenSSL.TLSEXT_NAMETYPE_host_name,
            UnsafeMutableRawPointer(mutating: name)) == 1 && library.SSL_set1_host(ssl, name) == 1
        }
        guard named else { throw TLSContext.failure(library, "Could not set the host name to verify") }
      }
      let protocols: [UInt8] = [8] + Array("http/1.1".utf8)
      // `SSL_set_alpn_protos` returns 0 on success.
      guard library.SSL_set_alpn_protos(ssl, protocols, UInt32(protocols.count)) == 0 else {
        throw TLSContext.failure(library, "Could not offer ALPN")
      }
    }

    deinit {
      context.library.SSL_free(ssl)
    }

    /// What a TLS call needs before it can go on.
    enum Want {
      case read
      case write
    }

    /// The outcome of one non-blocking TLS call.
    enum Step {
      /// Done: bytes read or written (0 when reading: the end of the stream).
      case done(Int)
      /// Call again once the socket is ready for this.
      case wants(Want)
      /// Failed: `errno` for a system failure, and OpenSSL's reasons.
      case failed(errno: Int32, reason: String?)
    }

    /// The error for a server's alert about the client's certificate, if OpenSSL's `reason`
    /// names one, or `nil`.
    ///
    /// The server judges the client's certificate, and under TLS 1.3 it says so after the
    /// handshake, when the client reads: `certificate_required` (alert 116) when none was sent
    /// is `.clientCertificateRequired`; `bad_certificate`, `unsupported_certificate`,
    /// `certificate_revoked`, `certificate_expired`, `certificate_unknown` and `unknown_ca`
    /// (42-46, 48) are `.clientCertificateRejected`. The client verifies the server's
    /// certificate itself, so no alert of the server's is about that one.
    static func clientCertificateFailure(reason: String, detail: String) -> URLError? {
      let code: URLError.Code
      let what: String
      if reason.contains("alert certificate required") {
        code = .clientCertificateRequired
        what = "The server requires a client certificate (HTTPClient.Configuration.clientCertificate)"
      } else if [
        "alert bad certificate", "alert unsupported certificate", "alert certificate revoked",
        "alert certificate expired", "alert certificate unknown", "alert unknown ca",
      ].contains(where: reason.contains) {
        code = .clientCertificateRejected
        what = "The server rejected the client certificate"
      } else {
        return nil
      }
      return URLError(code, userInfo: [NSLocalizedDescriptionKey: "\(what): \(detail)"])
    }

    /// Takes one step of the handshake.
    func handshake() -> Step {
      let library = context.library
      library.ERR_clear_error()
      errno = 0
      let result = library.SSL_connect(ssl)
      guard result == 1 else { return step(result, reading: false) }
      closesCleanly = true
      return .done(0)
    }

    /// Sends TLS's close_notify alert, at most once, without waiting for the server's.
    ///
    /// RFC 8446, section 6.1: a party that closes its side of a connection says so first (curl
    /// does); a server can then tell a client that is done from one cut off. Nothing is sent
    /// before the handshake finished or after a TLS call failed. It never waits: the socket is
    /// non-blocking, and when its send buffer is full the connection closes without the alert.
    /// A peer that has reset the connection makes the write fail with EPIPE, whose SIGPIPE is
    /// held back on this thread (see `SocketThreads.withBrokenPipeSignalHeld`): the pool closes
    /// connections on whichever thread lets go of them.
    func sendCloseNotify() {
      guard closesCleanly else { return }
      closesCleanly = false
      let library = context.library
      library.ERR_clear_error()
      _ = SocketThreads.withBrokenPipeSignalHeld { library.SSL_shutdown(ssl) }
      library.ERR_clear_error()
    }

    /// Reads into `buffer`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Step {
      let library = context.library
      library.ERR_clear_error()
      errno = 0
      let result = library.SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
      return result > 0 ? .done(Int(result)) : step(result, reading: true)
    }

    /// Reads into `buffer` as many bytes as have arrived, without waiting once some are read.
    ///
    /// `SSL_read` gives one TLS record a call (16 KiB at most, often less), and each read handed
    /// on alone costs its reader a delivery: a copy, a lock, a file write. What ends a batch
    /// after some bytes were read — the end of the stream or a failure — is kept and returned by
    /// the next call, so that nothing read is lost to it and it is not lost either.
    func readAvailable(into buffer: UnsafeMutableRawBufferPointer) -> Step {
      if !early.isEmpty, buffer.count > 0 {
        let count = min(early.count, buffer.count)
        early.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: count) }
        early.removeFirst(count)
        return .done(count)
      }
      if let held = heldStep {
        heldStep = nil
        return held
      }
      var total = 0
      while total < buffer.count {
        let step = read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...]))
        guard case .done(let count) = step, count > 0 else {
          if total == 0 { return step }
          if case .wants = step {} else { heldStep = step }
          return .done(total)
        }
        total += count
      }
      return .done(total)
    }

    /// What arrived while a request's body was being sent.
    enum EarlyAnswer {
      /// Nothing but interim (1xx) responses, read away, or TLS's own messages (a session
      /// ticket): the server still takes the body.
      case none
      /// Bytes of a final response (or of something that is not an interim one), kept for
      /// `readAvailable(into:)`.
      case answer
      /// The end of the stream.
      case closed
      /// Reading failed.
      case failed(errno: Int32, reason: String?)
    }

    /// Reads what the server sent while the body was being sent, without waiting, and says
    /// whether it is an answer; interim (1xx) responses are dropped, the rest is kept.
    ///
    /// Over plain TCP the socket is peeked at; through TLS the records have to be decrypted to
    /// be looked at, so what they hold is kept here, read before anything else.
    func readAnswerEarly() -> EarlyAnswer {
      var piece = [UInt8](repeating: 0, count: 16 * 1024)
      while true {
        let step = piece.withUnsafeMutableBytes { read(into: $0) }
        switch step {
        case .done(0):
          return early.isEmpty ? .closed : .answer
        case .done(let count):
          early.append(contentsOf: piece[..<count])
          while true {
            let end = early.withUnsafeBytes { HTTP1ResponseHead.end(in: $0) }
            // A head still arriving: a full one that is too long is the reader's to refuse.
            guard let end else {
              if early.count >= HTTP1ResponseHead.maximumSize { return .answer }
              break
            }
            let head = early.withUnsafeBytes {
              try? HTTP1ResponseHead.parse(UnsafeRawBufferPointer(rebasing: $0[..<end]))
            }
            guard let head, (100..<200).contains(head.statusCode), head.statusCode != 101 else {
              return .answer
            }
            early.removeFirst(end)
          }
        case .wants:
          // Nothing more for now; part of a head waits, kept, for the rest.
          return .none
        case .failed(let code, let reason):
          return early.isEmpty ? .failed(errno: code, reason: reason) : .answer
        }
      }
    }

    /// Writes from `bytes`; may write only part of them.
    func write(_ bytes: UnsafeRawBufferPointer) -> Step {
      let library = context.library
      library.ERR_clear_error()
      errno = 0
      let result = library.SSL_write(ssl, bytes.baseAddress, Int32(clamping: bytes.count))
      return result > 0 ? .done(Int(result)) : step(result, reading: false)
    }

    /// OpenSSL's reasons for an alert the server sent before it closed, read after a write
    /// failed (the connection reset or closed), or `nil` if none is there to read.
    ///
    /// A server that refuses the connection once the handshake is over (TLS 1.3's
    /// `certificate_required`) sends its alert and closes; a request written after that fails
    /// with a reset, and the alert that says why waits, unread, in the socket's receive buffer.
    func alertAfterFailedWrite() -> String? {
      let library = context.library
      library.ERR_clear_error()
      var byte: UInt8 = 0
      let result = library.SSL_read(ssl, &byte, 1)
      guard result <= 0, library.SSL_get_error(ssl, result) == OpenSSL.SSL_ERROR_SSL else {
        library.ERR_clear_error()
        return nil
      }
      return library.errorQueueText()
    }

    /// Whether decrypted bytes wait in OpenSSL's buffer, unread.
    ///
    /// `SSL_has_pending`, not `SSL_pending`: read ahead, bytes can wait in OpenSSL's buffer
    /// before they are decrypted, and the socket no longer shows them.
    var hasPendingBytes: Bool {
      !early.isEmpty || heldStep != nil || context.library.SSL_has_pending(ssl) != 0
    }

    private func step(_ result: Int32, reading: Bool) -> Step {
      let library = context.library
      let code = errno
      switch library.SSL_get_error(ssl, result) {
      case OpenSSL.SSL_ERROR_WANT_READ: return .wants(.read)
      case OpenSSL.SSL_ERROR_WANT_WRITE: return .wants(.write)
      case OpenSSL.SSL_ERROR_ZERO_RETURN where reading: return .done(0)
      case OpenSSL.SSL_ERROR_SYSCALL where reading && code == 0:
        // The end of the stream as a failed call reports it: OpenSSL must not be asked to
        // shut down after `SSL_ERROR_SYSCALL`.
        closesCleanly = false
        return .done(0)
      case OpenSSL.SSL_ERROR_SYSCALL:
        closesCleanly = false
        return .failed(errno: code, reason: library.errorQueueText())
      default:
        closesCleanly = false
        return .failed(errno: 0, reason: library.errorQueueText())
      }
    }

    /// The verification's error (an `X509_V_ERR_…` code), or `nil` if the certificate passed.
    var verificationError: Int? {
      let result = context.library.SSL_get_verify_result(ssl)
      return result == OpenSSL.X509_V_OK ? nil : result
    }

    /// Checks the server's key against the client's pins for `host`, if it is pinned.
    ///
    /// - Throws: `URLError.serverCertificateUntrusted` naming the host and the key's digest.
    func checkPins() throws(URLError) {
      guard let pins = context.trust.pins(for: host) else { return }
      let library = context.library
      let certificate = library.SSL_get1_peer_certificate(ssl)
      defer { if let certificate { library.X509_free(certificate) } }
      let pin = certificate.flatMap { TLSContext.publicKeyPin(of: $0, library: library) }
      guard let pin, pins.contains(pin) else {
        let found = pin.map { "sha256//\($0.base64EncodedString())" } ?? "no readable key"
        throw URLError(
          .serverCertificateUntrusted,
          userInfo: [
            NSLocalizedDescriptionKey:
              "SSL: public key does not match pinned public key for \(host) (the server's key is \(found))"
          ])
      }
    }

    /// The error of a certificate that failed verification with `code`, naming `host` and the
    /// reason in libcurl's words ("SSL certificate problem: …").
    func certificateError(_ code: Int) -> URLError {
      let library = context.library
      let reason = library.X509_verify_cert_error_string(code).map { String(cString: $0) } ?? "error \(code)"
      let urlCode: URLError.Code
      let text: String
      switch code {
      case OpenSSL.X509_V_ERR_CERT_HAS_EXPIRED:
        (urlCode, text) = (.serverCertificateHasBadDate, "SSL certificate problem: \(reason)")
      case OpenSSL.X509_V_ERR_CERT_NOT_YET_VALID:
        (urlCode, text) = (.serverCertificateNotYetValid, "SSL certificate problem: \(reason)")
      case OpenSSL.X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, OpenSSL.X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
        OpenSSL.X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        (urlCode, text) = (.serverCertificateHasUnknownRoot, "SSL certificate problem: \(reason)")
      case OpenSSL.X509_V_ERR_HOSTNAME_MISMATCH, OpenSSL.X509_V_ERR_IP_ADDRESS_MISMATCH:
        (urlCode, text) = (
          .serverCertificateUntrusted,
          "SSL: no alternative certificate subject name matches target host name '\(host)'"
        )
      default:
        (urlCode, text) = (.serverCertificateUntrusted, "SSL certificate problem: \(reason)")
      }
      return URLError(urlCode, userInfo: [NSLocalizedDescriptionKey: "\(text) (certificate of \(host))"])
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isAddress(_ host: String) -> Bool {
      var storage = in6_addr()
      return inet_pton(AF_INET, host, &storage) == 1 || inet_pton(AF_INET6, host, &storage) == 1
    }
  }

  /// A client's `TLSContext`, made on first use (loading OpenSSL and reading the certificates),
  /// or the reason it could not be.
  final class TLSContextCache: Sendable {
    let trust: HTTPClient.ServerTrust
    let clientCertificate: HTTPClient.ClientCertificate?
    private let made = LockedBox<Result<TLSContext, URLError>?>(nil)

    init(trust: HTTPClient.ServerTrust, clientCertificate: HTTPClient.ClientCertificate? = nil) {
      self.trust = trust
      self.clientCertificate = clientCertificate
    }

    /// The context, made now if it has not been.
    func context() throws(URLError) -> TLSContext {
      // Made under the lock (no user code: OpenSSL set-up), so that it is made once.
      try made.withLock { made in
        if let made { return made }
        let result = Result { () throws(URLError) in
          try TLSContext(trust: trust, clientCertificate: clientCertificate)
        }
        made = result
        return result
      }
      .get()
    }
  }
#else
  /// TLS on the socket transport needs Glibc; elsewhere the transport never serves HTTPS, and
  /// these stand-ins only keep the package building.
  final class TLSContext: Sendable {}

  final class TLSContextCache: Sendable {
    let trust: HTTPClient.ServerTrust
    let clientCertificate: HTTPClient.ClientCertificate?
    init(trust: HTTPClient.ServerTrust, clientCertificate: HTTPClient.ClientCertificate? = nil) {
      self.trust = trust
      self.clientCertificate = clientCertificate
    }
    func context() throws(URLError) -> TLSContext { throw URLError(.unsupportedURL) }
  }
#endif
