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

  /// What one upload came to: its outcome and time, the progress updates, what the server read.
  struct Upload {
    var result: Result<HTTPResponse, any Error>
    var elapsed: Duration
    var updates: [TransferProgress]
    var consumed: ConsumedBody?
  }

  /// Uploads a file of `content` with `PUT` to a server that reads it as `reading` says, from
  /// a client whose `timeout` is `timeout`, under a deadline `deadline` from the upload's start.
  static func upload(
    reading: RequestBodyHandling, timeout: Duration, deadline: Duration? = nil
  ) async throws -> Upload {
    let scratch = try UploadTests.Scratch()
    defer { scratch.remove() }
    let url = try scratch.file("upload.bin", content)
    return try await withServer({ router in
      router.on("PUT", "/upload", body: { _ in reading }) { _ in .respond(.text("ok")) }
    }) { server in
      let client = server.client(timeout: timeout)
      let (progress, stream) = TransferProgressHandler.makeStream(interval: .milliseconds(1))
      let collected = UploadTests.updates(stream)
      let start = ContinuousClock.now
      let (result, elapsed) = await outcome(
        of: client.upload(
          .file(url), to: "upload", method: .put, deadline: deadline.map { .after($0) }, progress: progress),
        since: start)
      return Upload(
        result: result, elapsed: elapsed, updates: await collected.value,
        consumed: server.requests.first?.consumedBody)
    }
  }

  /// The time allowed of an `HTTPError.timedOut` outcome; `nil`, with an issue, for any other.
  static func allowance<T>(
    _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
  ) -> Duration? {
    if case .timedOut(_, let allowed)? = httpError(result, sourceLocation: sourceLocation) { return allowed }
    Issue.record("expected HTTPError.timedOut, got \(result)", sourceLocation: sourceLocation)
    return nil
  }

  @Test func aSlowUploadThatKeepsSendingOutlivesTheClientTimeout() async throws {
    // The first 4 MiB at 32 KiB every 25 ms (3.2 s, longer than the timeout), the rest at full
    // speed. The client's progress still has gaps: its socket's send buffer (up to 4 MiB on
    // loopback) wakes the writer only when a third of it is free, about 1 s at this rate; the
    // 3 s timeout leaves room for that on a loaded machine (1 s failed there).
    let upload = try await Self.upload(
      reading: .throttle(chunkSize: 32 << 10, pause: .milliseconds(25), slowBytes: 4 << 20),
      timeout: .seconds(3))
    #expect(try upload.result.get().statusCode == 200)
    #expect(upload.elapsed > .seconds(3), "\(upload.elapsed)")
    let consumed = try #require(upload.consumed)
    #expect(consumed.byteCount == Int64(Self.content.count))
    #expect(consumed.isComplete)
    #expect(upload.updates.last?.isFinal == true)
    #expect(upload.updates.last?.completedBytes == Int64(Self.content.count))
  }

  @Test func aStalledUploadFailsAfterTheClientTimeout() async throws {
    // 64 KiB, then no more reading until the server stops.
    let upload = try await Self.upload(
      reading: .throttle(chunkSize: 64 << 10, pause: .seconds(60)), timeout: .milliseconds(300))
    #expect(try #require(Self.allowance(upload.result)) == .milliseconds(300))
    #expect(upload.elapsed >= .milliseconds(300), "\(upload.elapsed)")
    // The allowance says the client's timer ended it; this bounds the rest (the server would
    // wait 60 s), with room for a loaded machine.
    #expect(upload.elapsed < .seconds(20), "\(upload.elapsed)")
    // It stalled mid-body: the client had sent only part of the file.
    let sent = upload.updates.map(\.completedBytes).max() ?? 0
    #expect(sent > 0 && sent < Int64(Self.content.count), "sent \(sent)")
    #expect(upload.updates.last?.isFinal != true)
  }

  @Test func aDeadlineMidUploadFailsWhileBytesStillFlow() async throws {
    // 32 KiB every 50 ms: the whole body would take about 10 s, never idle for long.
    let upload = try await Self.upload(
      reading: .throttle(chunkSize: 32 << 10, pause: .milliseconds(50)), timeout: .seconds(1),
      deadline: .milliseconds(1500))
    #expect(try #require(Self.allowance(upload.result)) == .milliseconds(1500))
    #expect(upload.elapsed >= .milliseconds(1500), "\(upload.elapsed)")
    // The allowance says the deadline ended it, not the body's end (about 10 s, and a 200) nor
    // the 1 s idle timeout; this bounds the rest, with room for a loaded machine.
    #expect(upload.elapsed < .seconds(20), "\(upload.elapsed)")
    #expect(upload.updates.last?.isFinal != true)
  }
}
