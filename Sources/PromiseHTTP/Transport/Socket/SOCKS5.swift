import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The client's side of a SOCKS5 handshake (RFC 1928), with RFC 1929's user name and password.
///
/// The bytes to send and what the proxy's answers mean, without a socket, so that the handshake
/// is tested by feeding bytes; `SocketTask` drives it.
///
/// The order: the greeting (the methods the client offers) and the proxy's choice; if it
/// chose the password method, the credentials and the proxy's verdict; then the request to
/// connect and the proxy's reply, whose length depends on the address it carries.
enum SOCKS5 {
  /// Where the proxy is asked to connect: a name it resolves (`socks5h://`), or an address
  /// this process resolved (`socks5://`), 4 or 16 bytes.
  enum Destination: Equatable {
    case name(String)
    case address([UInt8])
  }

  /// The authentication method the proxy chose.
  enum Method: Equatable {
    case none
    case password
  }

  /// The greeting: version 5 and the methods offered, "no authentication" and, with
  /// credentials, "username/password".
  static func greeting(offeringPassword: Bool) -> [UInt8] {
    offeringPassword ? [5, 2, 0, 2] : [5, 1, 0]
  }

  /// The method the proxy chose, from its 2-byte answer to the greeting.
  ///
  /// - Throws: `.userAuthenticationRequired` when it accepts none of those offered and no
  ///   credentials were offered (it wants some), `.cannotConnectToHost` when it accepts none
  ///   even so, `.cannotParseResponse` for an answer that is not SOCKS5 or names a method that
  ///   was not offered.
  static func chosenMethod(_ answer: [UInt8], offeredPassword: Bool) throws(URLError) -> Method {
    guard answer.count == 2, answer[0] == 5 else {
      throw failure(.cannotParseResponse, "The proxy's answer to the greeting is not SOCKS5")
    }
    switch answer[1] {
    case 0: return .none
    case 2 where offeredPassword: return .password
    case 0xFF where offeredPassword:
      throw failure(
        .cannotConnectToHost, "The SOCKS5 proxy accepts none of the authentication methods offered")
    case 0xFF:
      throw failure(
        .userAuthenticationRequired,
        "The SOCKS5 proxy requires authentication (give user:password@ in the proxy's URL)")
    default:
      throw failure(
        .cannotParseResponse, "The SOCKS5 proxy chose a method that was not offered (\(answer[1]))")
    }
  }

  /// The username and password (RFC 1929), each at most 255 bytes of UTF-8.
  static func credentials(user: String, password: String) throws(URLError) -> [UInt8] {
    let user = Array(user.utf8)
    let password = Array(password.utf8)
    guard user.count <= 255, password.count <= 255 else {
      throw failure(.userAuthenticationRequired, "A SOCKS5 user name or password is longer than 255 bytes")
    }
    return [1, UInt8(user.count)] + user + [UInt8(password.count)] + password
  }

  /// Checks the proxy's 2-byte verdict on the credentials.
  ///
  /// - Throws: `.userAuthenticationRequired` when it rejected them, `.cannotParseResponse` for
  ///   an answer of another shape.
  static func checkCredentialsVerdict(_ answer: [UInt8]) throws(URLError) {
    guard answer.count == 2, answer[0] == 1 else {
      throw failure(.cannotParseResponse, "The SOCKS5 proxy's answer to the credentials is malformed")
    }
    guard answer[1] == 0 else {
      throw failure(.userAuthenticationRequired, "The SOCKS5 proxy rejected the user name and password")
    }
  }

  /// The request to connect to `destination`:`port`.
  ///
  /// - Throws: `.badURL` for a name longer than 255 bytes or an address of another length.
  static func connectRequest(to destination: Destination, port: Int) throws(URLError) -> [UInt8] {
    var request: [UInt8] = [5, 1, 0]
    switch destination {
    case .name(let name):
      let bytes = Array(name.utf8)
      guard !bytes.isEmpty, bytes.count <= 255 else {
        throw failure(.badURL, "A host name longer than 255 bytes cannot go through a SOCKS5 proxy")
      }
      request += [3, UInt8(bytes.count)] + bytes
    case .address(let bytes) where bytes.count == 4:
      request += [1] + bytes
    case .address(let bytes) where bytes.count == 16:
      request += [4] + bytes
    case .address:
      throw failure(.badURL, "An address that is neither IPv4 nor IPv6")
    }
    return request + [UInt8(port >> 8 & 0xFF), UInt8(port & 0xFF)]
  }

  /// How many bytes the proxy's reply to the connect request has in all, from its first five
  /// (version, reply, reserved, address type, and the first byte of the address).
  ///
  /// - Throws: `.cannotParseResponse` for a reply that is not SOCKS5 or an unknown address type.
  static func replyLength(prefix: [UInt8]) throws(URLError) -> Int {
    guard prefix.count == 5, prefix[0] == 5 else {
      throw failure(.cannotParseResponse, "The SOCKS5 proxy's reply to the connect request is not SOCKS5")
    }
    // The header (4), the address, the port (2).
    switch prefix[3] {
    case 1: return 4 + 4 + 2
    case 3: return 4 + 1 + Int(prefix[4]) + 2
    case 4: return 4 + 16 + 2
    default:
      throw failure(
        .cannotParseResponse, "The SOCKS5 proxy's reply has an unknown address type (\(prefix[3]))")
    }
  }

  /// Checks the reply to the connect request: 0 opens the tunnel.
  ///
  /// - Throws: `.cannotConnectToHost` for any refusal, with RFC 1928's words for its code
  ///   (connection refused, host unreachable, not allowed by the proxy's rules, ...).
  static func checkReply(_ reply: [UInt8], destination: String) throws(URLError) {
    guard reply.count >= 2, reply[0] == 5 else {
      throw failure(.cannotParseResponse, "The SOCKS5 proxy's reply to the connect request is not SOCKS5")
    }
    guard reply[1] != 0 else { return }
    let reasons = [
      1: "general failure", 2: "not allowed by the proxy's rules", 3: "network unreachable",
      4: "host unreachable", 5: "connection refused", 6: "TTL expired", 7: "command not supported",
      8: "address type not supported",
    ]
    let reason = reasons[Int(reply[1])] ?? "reply \(reply[1])"
    throw failure(
      .cannotConnectToHost, "The SOCKS5 proxy could not connect to \(destination): \(reason) (\(reply[1]))")
  }

  private static func failure(_ code: URLError.Code, _ text: String) -> URLError {
    URLError(code, userInfo: [NSLocalizedDescriptionKey: text])
  }
}
