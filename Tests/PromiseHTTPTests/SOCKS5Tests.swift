import Foundation
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The SOCKS5 handshake's bytes (RFC 1928, RFC 1929), fed without a socket: what the client
/// sends, and what each answer of the proxy means.
@Suite("SOCKS5 handshake")
struct SOCKS5Tests {
  /// The code of the `URLError` `body` throws, `nil` if it throws none (and an issue if it
  /// throws another error).
  private func code(_ body: () throws -> Void) -> URLError.Code? {
    do {
      try body()
      return nil
    } catch let error as URLError {
      return error.code
    } catch {
      Issue.record("not a URLError: \(error)")
      return nil
    }
  }

  @Test func theGreetingOffersNoAuthenticationAndThePasswordOnlyWithCredentials() {
    #expect(SOCKS5.greeting(offeringPassword: false) == [5, 1, 0])
    #expect(SOCKS5.greeting(offeringPassword: true) == [5, 2, 0, 2])
  }

  @Test func theProxysChoiceOfMethodIsRead() throws {
    #expect(try SOCKS5.chosenMethod([5, 0], offeredPassword: false) == SOCKS5.Method.none)
    #expect(try SOCKS5.chosenMethod([5, 0], offeredPassword: true) == SOCKS5.Method.none)
    #expect(try SOCKS5.chosenMethod([5, 2], offeredPassword: true) == .password)
    // No method acceptable: it wants credentials, or does not take those offered.
    #expect(
      code { _ = try SOCKS5.chosenMethod([5, 0xFF], offeredPassword: false) } == .userAuthenticationRequired)
    #expect(code { _ = try SOCKS5.chosenMethod([5, 0xFF], offeredPassword: true) } == .cannotConnectToHost)
    // A method not offered, another version, a short answer.
    #expect(code { _ = try SOCKS5.chosenMethod([5, 2], offeredPassword: false) } == .cannotParseResponse)
    #expect(code { _ = try SOCKS5.chosenMethod([4, 0], offeredPassword: false) } == .cannotParseResponse)
    #expect(code { _ = try SOCKS5.chosenMethod([5], offeredPassword: false) } == .cannotParseResponse)
  }

  @Test func credentialsGoWithTheirLengthsAndTheVerdictIsRead() throws {
    #expect(
      try SOCKS5.credentials(user: "ada", password: "s3cret") == [1, 3] + Array("ada".utf8) + [6]
        + Array("s3cret".utf8))
    #expect(try SOCKS5.credentials(user: "é", password: "") == [1, 2, 0xC3, 0xA9, 0])
    let long = String(repeating: "u", count: 256)
    #expect(code { _ = try SOCKS5.credentials(user: long, password: "p") } == .userAuthenticationRequired)
    #expect(code { try SOCKS5.checkCredentialsVerdict([1, 0]) } == nil)
    #expect(code { try SOCKS5.checkCredentialsVerdict([1, 1]) } == .userAuthenticationRequired)
    #expect(code { try SOCKS5.checkCredentialsVerdict([5, 0]) } == .cannotParseResponse)
  }

  @Test func theConnectRequestCarriesANameOrAnAddressAndThePort() throws {
    #expect(
      try SOCKS5.connectRequest(to: .name("example.com"), port: 443)
        == [5, 1, 0, 3, 11] + Array("example.com".utf8) + [1, 187])
    #expect(
      try SOCKS5.connectRequest(to: .address([127, 0, 0, 1]), port: 8080) == [
        5, 1, 0, 1, 127, 0, 0, 1, 0x1F, 0x90,
      ])
    let v6 = [UInt8](repeating: 0, count: 15) + [1]
    #expect(try SOCKS5.connectRequest(to: .address(v6), port: 80) == [5, 1, 0, 4] + v6 + [0, 80])
    #expect(
      code { _ = try SOCKS5.connectRequest(to: .name(String(repeating: "a", count: 256)), port: 80) }
        == .badURL)
    #expect(code { _ = try SOCKS5.connectRequest(to: .address([1, 2, 3]), port: 80) } == .badURL)
  }

  @Test func theReplysLengthFollowsItsAddressType() throws {
    #expect(try SOCKS5.replyLength(prefix: [5, 0, 0, 1, 127]) == 10)
    #expect(try SOCKS5.replyLength(prefix: [5, 0, 0, 3, 7]) == 14)
    #expect(try SOCKS5.replyLength(prefix: [5, 0, 0, 4, 0]) == 22)
    #expect(code { _ = try SOCKS5.replyLength(prefix: [5, 0, 0, 9, 0]) } == .cannotParseResponse)
    #expect(code { _ = try SOCKS5.replyLength(prefix: [4, 0, 0, 1, 0]) } == .cannotParseResponse)
  }

  @Test func aRefusalIsCannotConnectToHostWithItsReason() throws {
    #expect(code { try SOCKS5.checkReply([5, 0, 0, 1, 0], destination: "a:1") } == nil)
    for (reply, reason) in [
      (1, "general failure"), (2, "not allowed"), (4, "host unreachable"), (5, "connection refused"),
    ] {
      do throws(URLError) {
        try SOCKS5.checkReply([5, UInt8(reply), 0, 1, 0], destination: "example.com:80")
        Issue.record("reply \(reply) accepted")
      } catch {
        #expect(error.code == .cannotConnectToHost)
        #expect(
          error.localizedDescription.contains("example.com:80: \(reason)"), "\(error.localizedDescription)")
      }
    }
    #expect(
      code { try SOCKS5.checkReply([0x48, 0x54, 0x54, 0x50, 0x2F], destination: "a:1") }
        == .cannotParseResponse)
  }
}
