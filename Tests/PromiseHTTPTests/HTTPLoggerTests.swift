import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

@Suite("HTTPLogger", .timeLimit(.minutes(1)))
struct HTTPLoggerTests {
  @Test func itLogsEachEventOfARequestWithCredentialsRedacted() async throws {
    let calls = Counter()
    try await withServer({ router in
      router.on("GET", "/config") { _ in
        calls.next() == 1 ? .respond(.text("busy", status: 503)) : .respond(.text("fine"))
      }
    }) { server in
      let lines = Recorder<String>()
      let client = server.client(
        retryPolicy: RetryPolicy(backoff: .constant(.milliseconds(5))),
        sensitiveHeaders: HTTPClient.defaultSensitiveHeaders.union(["X-Session"]),
        interceptors: [
          HTTPLogger(sensitiveHeaders: HTTPClient.defaultSensitiveHeaders.union(["X-Session"])) {
            lines.append($0)
          }
        ])
      _ = try await client.get(
        "config", headers: ["Authorization": "Bearer s3cret", "X-Session": "s3cret", "X-App": "story"]
      ).value
      #expect(await eventually { lines.all.count == 6 })
      let url = server.baseURL.appendingPathComponent("config").absoluteString
      #expect(
        lines.all == [
          "→ GET \(url) (attempt 1) Authorization: <redacted>, X-App: story, X-Session: <redacted>",
          "← 503 \(url) (attempt 1), 4 bytes",
          "↻ attempt 2 in 0.005 seconds",
          "→ GET \(url) (attempt 2) Authorization: <redacted>, X-App: story, X-Session: <redacted>",
          "← 200 \(url) (attempt 2), 4 bytes",
          "✓ 200 \(url), 4 bytes",
        ])
      #expect(!lines.all.joined().contains("s3cret"))
    }
  }

  @Test func aFailureIsLoggedWithTheErrorsRedactedDescription() async throws {
    let closed = try ClosedPort()
    let base = try #require(URL(string: "http://bob:pa55word@127.0.0.1:\(closed.port)/"))
    let lines = Recorder<String>()
    let client = HTTPClient(
      baseURL: base,
      configuration: .init(retryPolicy: .none, interceptors: [HTTPLogger { lines.append($0) }]))
    _ = await outcome(of: client.get("x"))
    withExtendedLifetime(closed) {}
    #expect(await eventually { lines.all.count == 3 })
    #expect(lines.all.first?.hasPrefix("→ GET http://127.0.0.1:\(closed.port)/x (attempt 1)") == true)
    #expect(lines.all.dropFirst().allSatisfy { $0.hasPrefix("✕ ") })
    #expect(!lines.all.joined().contains("pa55word"))
  }
}
