// The imports Docs/AsyncAwait.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.async-imports
import Promises
// snippet.end
import Testing

/// An async API, as a modern SDK would offer it.
func fetchToken(deviceID: String) async throws -> String {
  "token-for-\(deviceID)"
}

@Suite("Docs/AsyncAwait.md", .timeLimit(.minutes(1)))
struct AsyncAwaitExamples {
  @Test func awaitAPromise() async throws {
    // snippet.async-await-value
    let config = try await loadConfig(from: "backup").value
    // snippet.hide
    #expect(config["fps"] == 30)
    // snippet.end
  }

  @Test func awaitARejection() async throws {
    // snippet.async-await-error
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    do {
      let config = try await loadConfig(from: "primary").value
      print("fps \(config["fps"] ?? 0)")
    } catch {
      print("failed: \(error)")  // prints "failed: serverDown"
    }
    // snippet.hide
    #expect(output.lines == ["failed: serverDown"])
    // snippet.end
  }

  @Test func promiseFromAsyncCode() async throws {
    // snippet.async-promise-from-async
    let header = Promise { try await fetchToken(deviceID: "A1B2") }
      .map { token in "Bearer \(token)" }
    // snippet.hide
    #expect(try await header.value == "Bearer token-for-A1B2")
    // snippet.end
  }

  @Test func cancellingTheTaskCancelsThePromise() async throws {
    // snippet.async-cancel-task
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (download, resolver) = Promise<[String: Int]>.pending()
    resolver.onCancel { print("download cancelled") }

    let task = Task { try await download.value }
    task.cancel()
    // prints "download cancelled"
    // snippet.hide
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(output.lines == ["download cancelled"])
    #expect(download.isRejected)
    // snippet.end
  }

  @Test func awaitingASharedPromise() async throws {
    // snippet.async-cancel-shared
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (config, resolver) = Promise<[String: Int]>.pending()
    let fps = config.map { config in config["fps"] ?? 25 }

    let task = Task { try await config.map { $0 }.value }
    task.cancel()  // cancels only the promise the task awaits

    resolver.fulfill(["fps": 30])
    print(try await fps.value)  // prints "30"
    // snippet.hide
    _ = await task.result
    #expect(output.lines == ["30"])
    // snippet.end
  }

  @Test func cancellingThePromiseCancelsTheTask() async throws {
    // snippet.async-cancel-promise
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let events = EventSource(log: output.print)
    // snippet.show
    let event = Promise { try await events.next() }
    event.cancel()  // rejects `event` at once and cancels the task running events.next()

    do {
      _ = try await event.value
    } catch is CancellationError {
      print("cancelled")
    }
    // prints "cancelled"
    // snippet.hide
    #expect(await output.lines(count: 2).sorted() == ["cancelled", "event source: task cancelled"])
    // snippet.end
  }
}
