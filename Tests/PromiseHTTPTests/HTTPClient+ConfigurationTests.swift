import Foundation
import PromiseHTTP
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite("HTTPClient.Configuration")
struct HTTPClientConfigurationTests {
  @Test func everyFieldStartsAtItsDocumentedDefault() {
    let configuration = HTTPClient.Configuration()
    #expect(configuration.timeout == HTTPClient.defaultTimeout)
    #expect(configuration.maximumQueueWait == HTTPClient.defaultMaximumQueueWait)
    #expect(configuration.maximumResponseSize == HTTPClient.defaultMaximumResponseSize)
    #expect(configuration.redirectPolicy.maximumRedirects == HTTPClient.defaultMaximumRedirects)
    #expect(configuration.sensitiveHeaders == HTTPClient.defaultSensitiveHeaders)
    #expect(configuration.acceptableStatusCodes == 200..<300)
    #expect(configuration.retryPolicy.maximumAttempts == RetryPolicy.defaultMaximumAttempts)
    #expect(configuration.maximumConcurrentRequestsPerHost == nil)
    #expect(configuration.authenticator == nil)
    #expect(configuration.callbackQueue == nil)
    #expect(configuration.sessionConfiguration.httpCookieStorage == nil)
    #expect(configuration.sessionConfiguration.urlCache == nil)
  }

  @Test func theSessionConfigurationChangesInPlaceAndTheClientCopiesIt() throws {
    let configuration = HTTPClient.Configuration()
    configuration.sessionConfiguration.httpMaximumConnectionsPerHost = 3
    #expect(configuration.sessionConfiguration.httpMaximumConnectionsPerHost == 3)
    let base = try #require(URL(string: "http://127.0.0.1:9/"))
    let client = HTTPClient(baseURL: base, configuration: configuration)
    configuration.sessionConfiguration.httpMaximumConnectionsPerHost = 9
    #expect(client.maximumConcurrentRequestsPerHost == 3)
    // The limit raised the client's copy, not the configuration it was given.
    let raised = HTTPClient(
      baseURL: base,
      configuration: .init(
        sessionConfiguration: configuration.sessionConfiguration, maximumConcurrentRequestsPerHost: 12))
    #expect(raised.maximumConcurrentRequestsPerHost == 12)
    #expect(configuration.sessionConfiguration.httpMaximumConnectionsPerHost == 9)
  }

  @Test func aClientReportsTheConfigurationItWasMadeWith() throws {
    let base = try #require(URL(string: "http://127.0.0.1:9/"))
    let client = HTTPClient(
      baseURL: base,
      configuration: .init(
        retryPolicy: .none, timeout: .seconds(5), maximumQueueWait: .seconds(1), maximumResponseSize: 10,
        acceptableStatusCodes: 200..<400))
    #expect(client.retryPolicy.maximumAttempts == 1)
    #expect(client.timeout == .seconds(5))
    #expect(client.maximumQueueWait == .seconds(1))
    #expect(client.maximumResponseSize == 10)
    #expect(client.acceptableStatusCodes == 200..<400)
    #expect(client.configuration.timeout == .seconds(5))
  }

  @Test func aClientMadeFromASessionUsesItsConfiguration() throws {
    let session = URLSessionConfiguration.ephemeral
    session.httpMaximumConnectionsPerHost = 3
    session.httpAdditionalHeaders = ["X-Api-Key": "k"]
    let base = try #require(URL(string: "http://127.0.0.1:9/"))
    let client = HTTPClient(baseURL: base, session: URLSession(configuration: session))
    #expect(client.maximumConcurrentRequestsPerHost == 3)
    #expect(client.defaultHeaders["X-Api-Key"] == "k")
  }
}
