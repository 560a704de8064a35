import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

/// The updates a progress closure received, in order.
final class ProgressLog: Sendable {
  private let box = LockedBox<[TransferProgress]>([])

  func append(_ progress: TransferProgress) { box.withLock { $0.append(progress) } }
  var updates: [TransferProgress] { box.load() }
}

/// Progress: the first update at once, a few per second, the final one equal to the file.
@Suite("TransferProgress", .timeLimit(.minutes(1)))
struct TransferProgressTests {
  @Test func theReporterDeliversTheFirstUpdateAtOnceAndCoalescesTheRest() async throws {
    let queue = DispatchQueue(label: "TransferProgressTests.reporter")
    let log = ProgressLog()
    let reporter = ProgressReporter(
      TransferProgressHandler(on: queue, interval: .seconds(60)) { log.append($0) }, defaultQueue: .global())
    reporter.update(completed: 0, expected: 100)
    for completed in 1...50 { reporter.update(completed: Int64(completed), expected: 100) }
    reporter.finish(completed: 100, expected: 100)
    reporter.update(completed: 7, expected: 100)
    reporter.finish(completed: 7, expected: 100)
    await offThePool { queue.sync {} }
    #expect(
      log.updates == [
        TransferProgress(completedBytes: 0, expectedBytes: 100),
        TransferProgress(completedBytes: 100, expectedBytes: 100, isFinal: true),
      ])
  }

  @Test func theReporterDeliversTheLatestHeldUpdateWhenTheIntervalHasPassed() async throws {
    let queue = DispatchQueue(label: "TransferProgressTests.held")
    let log = ProgressLog()
    let reporter = ProgressReporter(
      TransferProgressHandler(on: queue, interval: .milliseconds(20)) { log.append($0) },
      defaultQueue: .global())
    reporter.update(completed: 1, expected: nil)
    reporter.update(completed: 2, expected: nil)
    reporter.update(completed: 3, expected: nil)
    #expect(await eventually { log.updates.count == 2 })
    #expect(log.updates.map(\.completedBytes) == [1, 3])
    reporter.abandon()
    reporter.update(completed: 4, expected: nil)
    await offThePool { queue.sync {} }
    #expect(log.updates.map(\.completedBytes) == [1, 3], "nothing after abandon, and no final update")
  }

  @Test func anAbandonedStreamEndsWithoutAFinalUpdate() async {
    let (handler, updates) = TransferProgressHandler.makeStream()
    let reporter = ProgressReporter(handler, defaultQueue: .global())
    reporter.update(completed: 5, expected: 10)
    reporter.abandon()
    var received: [TransferProgress] = []
    for await update in updates { received.append(update) }
    #expect(received == [TransferProgress(completedBytes: 5, expectedBytes: 10)])
  }

  @Test func progressValuesDescribeThemselves() {
    #expect(TransferProgress(completedBytes: 5, expectedBytes: 10).fractionCompleted == 0.5)
    #expect(TransferProgress(completedBytes: 5, expectedBytes: nil).fractionCompleted == nil)
    #expect(TransferProgress(completedBytes: 0, expectedBytes: 0, isFinal: true).fractionCompleted == 1)
    #expect(
      "\(TransferProgress(completedBytes: 5, expectedBytes: 10, isFinal: true))" == "5 of 10 bytes (final)")
  }

  @Test func aSlowDripIsReportedInAFewUpdatesEndingWithTheFileSize() async throws {
    let content = downloadContent(200 * 1024)
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        // 200 chunks, 5 ms apart: about a second.
        router.on("GET", "/file") { _ in
          .trickle(ServerResponse(body: content), chunkSize: 1024, interval: .milliseconds(5))
        }
      }) { server in
        let queue = DispatchQueue(label: "TransferProgressTests.drip")
        let log = ProgressLog()
        let progress = TransferProgressHandler(on: queue) { log.append($0) }
        let download = try await server.client().download("file", to: directory.file(), progress: progress)
          .value
        await offThePool { queue.sync {} }
        let updates = log.updates
        #expect(updates.first == TransferProgress(completedBytes: 0, expectedBytes: Int64(content.count)))
        #expect(
          updates.last
            == TransferProgress(
              completedBytes: download.byteCount, expectedBytes: download.byteCount, isFinal: true))
        #expect(download.byteCount == Int64(content.count))
        // At most one every 100 ms, plus the first and the last: far fewer than the 200 chunks.
        #expect(updates.count >= 3 && updates.count <= 25, "\(updates.count) updates")
        #expect(updates.filter(\.isFinal).count == 1)
        #expect(zip(updates, updates.dropFirst()).allSatisfy { $0.completedBytes <= $1.completedBytes })
      }
    }
  }

  @Test func theStreamOfADownloadEndsAfterTheFinalUpdate() async throws {
    let content = downloadContent(1 << 20)
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in
          .trickle(ServerResponse(body: content), chunkSize: 64 << 10, interval: .milliseconds(10))
        }
      }) { server in
        let (progress, updates) = TransferProgressHandler.makeStream()
        let download = server.client().download("file", to: directory.file(), progress: progress)
        var received: [TransferProgress] = []
        for await update in updates { received.append(update) }
        let size = try await download.value.byteCount
        #expect(received.last == TransferProgress(completedBytes: size, expectedBytes: size, isFinal: true))
        #expect(size == Int64(content.count))
        #expect(received.count >= 2)
      }
    }
  }

  @Test func theStreamOfAFailedDownloadEndsWithoutAFinalUpdate() async throws {
    let content = downloadContent(1 << 20)
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .resetMidBody(ServerResponse(body: content), afterBytes: 300_000) }
      }) { server in
        let (progress, updates) = TransferProgressHandler.makeStream()
        let download = server.client().download("file", to: directory.file(), progress: progress)
        var received: [TransferProgress] = []
        for await update in updates { received.append(update) }
        let (result, _) = await outcome(of: download)
        #expect(httpError(result) != nil)
        #expect(!received.contains { $0.isFinal })
        #expect(directory.names.isEmpty)
      }
    }
  }
}
