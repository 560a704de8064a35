import Foundation

#if canImport(Glibc)
  import Glibc

  /// The system's OpenSSL 3, loaded at run time: the functions the socket transport's TLS uses,
  /// looked up by name.
  ///
  /// Why at run time: the package then needs no OpenSSL headers or development package to
  /// build, and no dependency; FoundationNetworking already has `libssl.so.3` in the process
  /// (through libcurl), so loading it costs nothing. Where it cannot be loaded, HTTPS stays
  /// with `URLSession` (`SocketTransportSettings.serves`).
  ///
  /// The constants below are the values of OpenSSL 3's macros (checked against its headers:
  /// `ssl.h`, `tls1.h`, `prov_ssl.h`, `x509_vfy.h`); the macros that are calls of
  /// `SSL_ctrl`/`SSL_CTX_ctrl` are spelled out as those calls.
  final class OpenSSL: Sendable {
    // Safety of `Sendable`: every stored property is a constant (`let`) function pointer looked
    // up once in `init`; OpenSSL 3 initializes itself on first use and its functions may be
    // called from any thread (on distinct `SSL` objects; `SSL_CTX` set-up is done before
    // sharing, `TLSContext`).

    typealias Pointer = OpaquePointer

    let TLS_client_method: @convention(c) () -> Pointer?
    let SSL_CTX_new: @convention(c) (Pointer?) -> Pointer?
    let SSL_CTX_free: @convention(c) (Pointer?) -> Void
    let SSL_CTX_ctrl: @convention(c) (Pointer?, Int32, Int, UnsafeMutableRawPointer?) -> Int
    let SSL_CTX_set_options: @convention(c) (Pointer?, UInt64) -> UInt64
    let SSL_CTX_set_verify: @convention(c) (Pointer?, Int32, UnsafeMutableRawPointer?) -> Void
    let SSL_CTX_set_default_verify_paths: @convention(c) (Pointer?) -> Int32
    let SSL_CTX_get_cert_store: @convention(c) (Pointer?) -> Pointer?
    let SSL_new: @convention(c) (Pointer?) -> Pointer?
    let SSL_free: @convention(c) (Pointer?) -> Void
    let SSL_set_fd: @convention(c) (Pointer?, Int32) -> Int32
    let SSL_ctrl: @convention(c) (Pointer?, Int32, Int, UnsafeMutableRawPointer?) -> Int
    let SSL_set1_host: @convention(c) (Pointer?, UnsafePointer<CChar>?) -> Int32
    let SSL_get0_param: @convention(c) (Pointer?) -> Pointer?
    let SSL_set_alpn_protos: @convention(c) (Pointer?, UnsafePointer<UInt8>?, UInt32) -> Int32
    let SSL_connect: @convention(c) (Pointer?) -> Int32
    let SSL_read: @convention(c) (Pointer?, UnsafeMutableRawPointer?, Int32) -> Int32
    let SSL_write: @convention(c) (Pointer?, UnsafeRawPointer?, Int32) -> Int32
    let SSL_shutdown: @convention(c) (Pointer?) -> Int32
    let SSL_pending: @convention(c) (Pointer?) -> Int32
    let SSL_has_pending: @convention(c) (Pointer?) -> Int32
    let SSL_CTX_set_default_read_buffer_len: @convention(c) (Pointer?, Int) -> Void
    let SSL_get_error: @convention(c) (Pointer?, Int32) -> Int32
    let SSL_get_verify_result: @convention(c) (Pointer?) -> Int
    let SSL_get1_peer_certificate: @convention(c) (Pointer?) -> Pointer?
    let X509_verify_cert_error_string: @convention(c) (Int) -> UnsafePointer<CChar>?
    let X509_VERIFY_PARAM_set1_ip_asc: @convention(c) (Pointer?, UnsafePointer<CChar>?) -> Int32
    let X509_STORE_add_cert: @convention(c) (Pointer?, Pointer?) -> Int32
    let X509_free: @convention(c) (Pointer?) -> Void
    let X509_get0_pubkey: @convention(c) (Pointer?) -> Pointer?
    let i2d_PUBKEY: @convention(c) (Pointer?, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32
    let BIO_new_mem_buf: @convention(c) (UnsafeRawPointer?, Int32) -> Pointer?
    let BIO_free: @convention(c) (Pointer?) -> Int32
    let PEM_read_bio_X509:
      @convention(c) (
        Pointer?, UnsafeMutablePointer<Pointer?>?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?
      )
        -> Pointer?
    let PEM_read_bio_PrivateKey:
      @convention(c) (
        Pointer?, UnsafeMutablePointer<Pointer?>?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?
      )
        -> Pointer?
    let EVP_PKEY_free: @convention(c) (Pointer?) -> Void
    let SSL_CTX_use_certificate: @convention(c) (Pointer?, Pointer?) -> Int32
    let SSL_CTX_use_PrivateKey: @convention(c) (Pointer?, Pointer?) -> Int32
    let SSL_CTX_check_private_key: @convention(c) (Pointer?) -> Int32
    let EVP_sha256: @convention(c) () -> Pointer?
    let EVP_Digest:
      @convention(c) (
        UnsafeRawPointer?, Int, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt32>?, Pointer?,
        Pointer?
      ) -> Int32
    let ERR_get_error: @convention(c) () -> UInt
    let ERR_error_string_n: @convention(c) (UInt, UnsafeMutablePointer<CChar>?, Int) -> Void
    let ERR_clear_error: @convention(c) () -> Void

    // `ssl.h`, `tls1.h`, `prov_ssl.h`
    static let SSL_CTRL_MODE: Int32 = 33
    static let SSL_CTRL_CHAIN_CERT: Int32 = 89
    static let SSL_CTRL_SET_READ_AHEAD: Int32 = 41
    static let SSL_CTRL_SET_TLSEXT_HOSTNAME: Int32 = 55
    static let SSL_CTRL_SET_MIN_PROTO_VERSION: Int32 = 123
    static let TLSEXT_NAMETYPE_host_name = 0
    static let TLS1_2_VERSION = 0x0303
    static let SSL_MODE_ENABLE_PARTIAL_WRITE = 0x1
    static let SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER = 0x2
    static let SSL_OP_IGNORE_UNEXPECTED_EOF: UInt64 = 1 << 7
    static let SSL_VERIFY_PEER: Int32 = 0x01
    static let SSL_ERROR_SSL: Int32 = 1
    static let SSL_ERROR_WANT_READ: Int32 = 2
    static let SSL_ERROR_WANT_WRITE: Int32 = 3
    static let SSL_ERROR_SYSCALL: Int32 = 5
    static let SSL_ERROR_ZERO_RETURN: Int32 = 6
    // `x509_vfy.h`
    static let X509_V_OK = 0
    static let X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT = 2
    static let X509_V_ERR_CERT_NOT_YET_VALID = 9
    static let X509_V_ERR_CERT_HAS_EXPIRED = 10
    static let X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT = 18
    static let X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN = 19
    static let X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY = 20
    static let X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE = 21
    static let X509_V_ERR_HOSTNAME_MISMATCH = 62
    static let X509_V_ERR_IP_ADDRESS_MISMATCH = 64

    /// The library, loaded on first use, or why it could not be.
    static let shared: Result<OpenSSL, URLError> = Result { () throws(URLError) in try OpenSSL() }

    /// The library if it could be loaded.
    static var loaded: OpenSSL? { try? shared.get() }

    /// The names tried, in order: OpenSSL 3's, then the unversioned link of a development
    /// package (accepted only if it has every function, which OpenSSL 1.1 has not).
    ///
    /// With `PROMISEHTTP_OPENSSL_DIR` set in the environment, only the OpenSSL 3 libraries of
    /// that directory are tried (an OpenSSL 3 installed beside an older system one, say).
    static var libraryNames: [(String, String)] {
      if let directory = ProcessInfo.processInfo.environment["PROMISEHTTP_OPENSSL_DIR"], !directory.isEmpty {
        let base = directory.hasSuffix("/") ? directory : directory + "/"
        return [(base + "libssl.so.3", base + "libcrypto.so.3")]
      }
      return [("libssl.so.3", "libcrypto.so.3"), ("libssl.so", "libcrypto.so")]
    }

    private init() throws(URLError) {
      var reasons: [String] = []
      var handles: (ssl: UnsafeMutableRawPointer, crypto: UnsafeMutableRawPointer)?
      for (ssl, crypto) in Self.libraryNames {
        guard let sslHandle = dlopen(ssl, RTLD_NOW | RTLD_LOCAL) else {
          reasons.append(Self.dlerrorText(ssl))
          continue
        }
        guard let cryptoHandle = dlopen(crypto, RTLD_NOW | RTLD_LOCAL) else {
          reasons.append(Self.dlerrorText(crypto))
          dlclose(sslHandle)
          continue
        }
        // OpenSSL 1.1 has no `SSL_get1_peer_certificate`: only a 3.x library is taken.
        guard dlsym(sslHandle, "SSL_get1_peer_certificate") != nil else {
          reasons.append("\(ssl) is not OpenSSL 3")
          dlclose(sslHandle)
          dlclose(cryptoHandle)
          continue
        }
        handles = (sslHandle, cryptoHandle)
        break
      }
      guard let handles else {
        throw URLError(
          .secureConnectionFailed,
          userInfo: [
            NSLocalizedDescriptionKey:
              "TLS is unavailable: no OpenSSL 3 library could be loaded (\(reasons.joined(separator: "; ")))"
          ])
      }
      // The handles stay open for the life of the process: the pointers below point into them.
      var missing: [String] = []
      func load<F>(_ name: String, from handle: UnsafeMutableRawPointer, as: F.Type = F.self) -> F {
        guard let symbol = dlsym(handle, name) else {
          missing.append(name)
          return unsafeBitCast(Self.placeholder, to: F.self)
        }
        return unsafeBitCast(symbol, to: F.self)
      }
      let ssl = handles.ssl
      let crypto = handles.crypto
      TLS_client_method = load("TLS_client_method", from: ssl)
      SSL_CTX_new = load("SSL_CTX_new", from: ssl)
      SSL_CTX_free = load("SSL_CTX_free", from: ssl)
      SSL_CTX_ctrl = load("SSL_CTX_ctrl", from: ssl)
      SSL_CTX_set_options = load("SSL_CTX_set_options", from: ssl)
      SSL_CTX_set_verify = load("SSL_CTX_set_verify", from: ssl)
      SSL_CTX_set_default_verify_paths = load("SSL_CTX_set_default_verify_paths", from: ssl)
      SSL_CTX_get_cert_store = load("SSL_CTX_get_cert_store", from: ssl)
      SSL_new = load("SSL_new", from: ssl)
      SSL_free = load("SSL_free", from: ssl)
      SSL_set_fd = load("SSL_set_fd", from: ssl)
      SSL_ctrl = load("SSL_ctrl", from: ssl)
      SSL_set1_host = load("SSL_set1_host", from: ssl)
      SSL_get0_param = load("SSL_get0_param", from: ssl)
      SSL_set_alpn_protos = load("SSL_set_alpn_protos", from: ssl)
      SSL_connect = load("SSL_connect", from: ssl)
      SSL_read = load("SSL_read", from: ssl)
      SSL_write = load("SSL_write", from: ssl)
      SSL_shutdown = load("SSL_shutdown", from: ssl)
      SSL_pending = load("SSL_pending", from: ssl)
      SSL_has_pending = load("SSL_has_pending", from: ssl)
      SSL_CTX_set_default_read_buffer_len = load("SSL_CTX_set_default_read_buffer_len", from: ssl)
      SSL_get_error = load("SSL_get_error", from: ssl)
      SSL_get_verify_result = load("SSL_get_verify_result", from: ssl)
      SSL_get1_peer_certificate = load("SSL_get1_peer_certificate", from: ssl)
      X509_verify_cert_error_string = load("X509_verify_cert_error_string", from: crypto)
      X509_VERIFY_PARAM_set1_ip_asc = load("X509_VERIFY_PARAM_set1_ip_asc", from: crypto)
      X509_STORE_add_cert = load("X509_STORE_add_cert", from: crypto)
      X509_free = load("X509_free", from: crypto)
      X509_get0_pubkey = load("X509_get0_pubkey", from: crypto)
      i2d_PUBKEY = load("i2d_PUBKEY", from: crypto)
      BIO_new_mem_buf = load("BIO_new_mem_buf", from: crypto)
      BIO_free = load("BIO_free", from: crypto)
      PEM_read_bio_X509 = load("PEM_read_bio_X509", from: crypto)
      PEM_read_bio_PrivateKey = load("PEM_read_bio_PrivateKey", from: crypto)
      EVP_PKEY_free = load("EVP_PKEY_free", from: crypto)
      SSL_CTX_use_certificate = load("SSL_CTX_use_certificate", from: ssl)
      SSL_CTX_use_PrivateKey = load("SSL_CTX_use_PrivateKey", from: ssl)
      SSL_CTX_check_private_key = load("SSL_CTX_check_private_key", from: ssl)
      EVP_sha256 = load("EVP_sha256", from: crypto)
      EVP_Digest = load("EVP_Digest", from: crypto)
      ERR_get_error = load("ERR_get_error", from: crypto)
      ERR_error_string_n = load("ERR_error_string_n", from: crypto)
      ERR_clear_error = load("ERR_clear_error", from: crypto)
      guard missing.isEmpty else {
        throw URLError(
          .secureConnectionFailed,
          userInfo: [
            NSLocalizedDescriptionKey:
              "TLS is unavailable: the OpenSSL library lacks \(missing.joined(separator: ", "))"
          ])
      }
    }

    /// Stands in for a function that was not found; never called (`init` then throws).
    private static var placeholder: UnsafeMutableRawPointer { UnsafeMutableRawPointer(bitPattern: 1)! }

    private static func dlerrorText(_ name: String) -> String {
      dlerror().map { String(cString: $0) } ?? "\(name) could not be loaded"
    }

    /// The reasons on this thread's OpenSSL error queue, oldest first, which it empties.
    func errorQueueText() -> String? {
      var reasons: [String] = []
      var buffer = [CChar](repeating: 0, count: 256)
      while true {
        let code = ERR_get_error()
        if code == 0 { break }
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        reasons.append(String(decoding: text, as: UTF8.self))
      }
      return reasons.isEmpty ? nil : reasons.joined(separator: "; ")
    }

    /// The SHA-256 digest of `bytes`.
    func sha256(_ bytes: UnsafeRawBufferPointer) -> Data? {
      var digest = [UInt8](repeating: 0, count: 32)
      var size: UInt32 = 0
      guard EVP_Digest(bytes.baseAddress, bytes.count, &digest, &size, EVP_sha256(), nil) == 1, size == 32
      else {
        return nil
      }
      return Data(digest)
    }
  }
#endif
