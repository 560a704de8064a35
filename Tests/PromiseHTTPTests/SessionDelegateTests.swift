import Testing

@testable import PromiseHTTP

/// The answers to authentication challenges, decided without a session: Apple platforms raise
/// challenges that FoundationNetworking on Linux never does, so the decision is tested as a value.
@Suite("SessionDelegate")
struct SessionDelegateTests {
  // The values of the `NSURLAuthenticationMethod…` constants (their names, on every platform).
  @Test(
    "TLS challenges get the system's default handling, so HTTPS works on Apple platforms",
    arguments: ["NSURLAuthenticationMethodServerTrust", "NSURLAuthenticationMethodClientCertificate"])
  func tlsChallengesGetTheDefaultHandling(method: String) {
    #expect(SessionDelegate.answer(toChallengeWith: method) == .performDefaultHandling)
  }

  @Test(
    "HTTP challenges are cancelled, so that the 401 or 407 is delivered and nothing hangs",
    arguments: [
      "NSURLAuthenticationMethodHTTPBasic", "NSURLAuthenticationMethodHTTPDigest",
      "NSURLAuthenticationMethodNTLM", "NSURLAuthenticationMethodNegotiate",
      "NSURLAuthenticationMethodHTMLForm", "NSURLAuthenticationMethodDefault", "", "x-unknown",
    ])
  func httpChallengesAreCancelled(method: String) {
    #expect(SessionDelegate.answer(toChallengeWith: method) == .cancel)
  }

  @Test func theServerTrustConstantIsTheOneFoundationUses() {
    #expect(SessionDelegate.serverTrustMethod == "NSURLAuthenticationMethodServerTrust")
    #expect(SessionDelegate.clientCertificateMethod == "NSURLAuthenticationMethodClientCertificate")
  }
}
