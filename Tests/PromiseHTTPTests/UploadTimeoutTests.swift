import Foundation
import LoopbackHTTPServer
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The time limits of an upload: the client's `timeout` is an idle timeout (no byte sent or
/// received for that long), the request's `deadline` bounds the whole; against a loopback
/// server that reads the body slowly (`RequestBodyHandling.throttle`).
@Suite("Upload time limits", .timeLimit(.minutes(1)))
struct UploadTimeoutTests {
  /// The body: 6 MiB. The client's socket takes up to about 3 MiB at once on loopback (its send
  /// buffer grows to 4 MiB), so that it still has bytes to send while the server reads slowly.
  static let content = UploadTests.pattern(6 << 20)

  /// Runs `body` with a file of `content` to upload.
  static func withFile<T>(_ body: (URL) async throws -> T) async throws -> T {
    let scratch = try UploadTests.Scratch()
    defer { scratch.remove() }
    return try await body(try scratch.file("upload.bin", content))
  }

  @Test func aSlowUploadThatKeepsSendingOutlivesTheClientTimeout() async throws {
    try await Self.withFile { url in
      try await withServer({ router in
        // The first 768 KiB at 32 KiB every 50 ms (1.2 s, three times the timeout, never idle
        // for long), the rest at full speed.
        router.on(
          "PUT", "/slow",
          body: { _ in .throttle(chunkSize: 32 << 10, pause: .milliseconds(50), slowBytes: 768 << 10) }
        ) { request in
          .respond(.text("\(request.consumedBody?.byteCount ?? -1)"))
        }
      }) { server in
        let client = server.client(timeout: .milliseconds(400))
        let (progress, stream) = TransferProgressHandler.makeStream(interval: .milliseconds(1))
        let collected = UploadTests.updates(stream)
        let start = ContinuousClock.now
        let (result, elapsed) = await outcome(
          of: client.upload(.file(url), to: "slow", method: .put, progress: progress), since: start)
        let response = try result.get()
        #expect(response.statusCode == 200)
        #expect(elapsed > .milliseconds(1000), "\(elapsed)")
        let recorded = try #require(server.requests.first?.consumedBody)
        #expect(recorded.byteCount == Int64(Self.content.count))
        #expect(recorded.isComplete)
        let updates = await collected.value
        #expect(updates.last?.isFinal == true)
        #expect(updates.last?.completedBytes == Int64(Self.content.count))
      }
    }
  }

  @Test func aStalledUploadFailsAfterTheClientTimeout() async throws {
    try await Self.withFile { url in
      try await withServer({ router in
        // 64 KiB, then no more reading until the server stops.
        router.on(
          "PUT", "/stall",
          body: { _ in .throttle(chunkSize: 64 << 10, pause: .seconds(60)) }
        ) { _ in .respond(.text("unreachable")) }
      }) { server in
        let client = server.client(timeout: .milliseconds(300))
        let (progress, stream) = TransferProgressHandler.makeStream(interval: .milliseconds(1))
        let collected = UploadTests.updates(stream)
        let start = ContinuousClock.now
        let (result, elapsed) = await outcome(
          of: client.upload(.file(url), to: "stall", method: .put, progress: progress), since: start)
        guard case .timedOut(_, let allowed)? = httpError(result) else {
          Issue.record("got \(String(describing: httpError(result)))")
          return
        }
        #expect(allowed == .milliseconds(300))
        #expect(elapsed >= .milliseconds(300), "\(elapsed)")
        // FoundationNetworking's own idle timeout, the backstop, comes at 2 s.
        #expect(elapsed < .milliseconds(1500), "\(elapsed)")
        // It stalled mid-body: the client had sent only part of the file.
        let updates = await collected.value
        let sent = updates.map(\.completedBytes).max() ?? 0
        #expect(sent > 0 && sent < Int64(Self.content.count), "sent \(sent)")
        #expect(updates.last?.isFinal != true)
      }
    }
  }

  @Test func aDeadlineMidUploadFailsWhileBytesStillFlow() async throws {
    try await Self.withFile { url in
      try await withServer({ router in
        // 32 KiB every 50 ms: the whole body would take about 10 s.
        router.on(
          "PUT", "/slow",
          body: { _ in .throttle(chunkSize: 32 << 10, pause: .milliseconds(50)) }
        ) { _ in .respond(.text("ok")) }
      }) { server in
        let client = server.client(timeout: .milliseconds(400))
        let start = ContinuousClock.now
        let (result, elapsed) = await outcome(
          of: client.upload(.file(url), to: "slow", method: .put, deadline: .after(.milliseconds(900))),
          since: start)
        guard case .timedOut(_, let allowed)? = httpError(result) else {
          Issue.record("got \(String(describing: httpError(result)))")
          return
        }
        #expect(allowed == .milliseconds(900))
        #expect(elapsed >= .milliseconds(900), "\(elapsed)")
        #expect(elapsed < .seconds(3), "\(elapsed)")
      }
    }
  }
}
