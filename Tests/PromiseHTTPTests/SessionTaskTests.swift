import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Starting and cancelling requests never waits for FoundationNetworking's work queue.
@Suite("Session tasks", .timeLimit(.minutes(1)))
struct SessionTaskTests {
  /// Holds FoundationNetworking's work queue: `startLoading` runs on it, and waits here until
  /// the test lets it go. Not a mock of HTTP: no request of the client under test goes
  /// through it (it serves a session of the test's own).
  final class QueueHolder: URLProtocol {
    static let started = DispatchSemaphore(value: 0)
    static let release = DispatchSemaphore(value: 0)

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {
      Self.started.signal()
      _ = Self.release.wait(timeout: .now() + 5)
      client?.urlProtocol(self, didFailWithError: URLError(.cancelled))
    }
    override func stopLoading() {}
  }

  @Test func startingAndCancellingARequestDoNotWaitForFoundationNetworkingsQueue() async throws {
    try await withServer({ router in
      router.on("GET", "/hello") { _ in .respond(ServerResponse(body: Array("hi".utf8))) }
    }) { server in
      let client = server.client()
      let started = LockedBox<Promise<HTTPResponse>?>(nil)
      // All on one thread outside the cooperative pool, so that how long the queue is held does
      // not depend on when the pool resumes this task: every URLSession request of the process
      // (the suites running in parallel) waits meanwhile.
      let (held, returned) = await offThePool {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [QueueHolder.self]
        let holderSession = URLSession(configuration: configuration)
        defer { holderSession.invalidateAndCancel() }
        holderSession.dataTask(with: URL(string: "http://holder.invalid/")!).resume()
        guard QueueHolder.started.wait(timeout: .now() + 20) == .success else { return (false, false) }
        // FoundationNetworking's queue is held now. Starting and cancelling a request must
        // return anyway: if either waited for that queue, it would not return before the holder
        // lets go (after 5 s), and `done` would time out first.
        let done = DispatchSemaphore(value: 0)
        Thread {
          let first = client.get("hello")
          client.get("hello").cancel()
          started.withLock { $0 = first }
          done.signal()
        }.start()
        let returned = done.wait(timeout: .now() + 3) == .success
        QueueHolder.release.signal()
        return (true, returned)
      }
      try #require(held, "the holder never started")
      #expect(returned, "starting or cancelling a request waited for FoundationNetworking's queue")
      // Once the queue is free, the request started while it was held goes through.
      let first = try #require(await offThePool { started.load() })
      #expect(try await first.value.body == Data("hi".utf8))
    }
  }
}
