// The imports Docs/Cancellation.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.cancel-imports
import Dispatch
import Promises
// snippet.end
import Testing

@Suite("Docs/Cancellation.md", .timeLimit(.minutes(1)))
struct CancellationExamples {
  @Test func cancelRunsTheHandlers() {
    // snippet.cancel-basic
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (upload, resolver) = Promise<Int>.pending()
    resolver.onCancel { print("stop the upload") }

    upload.cancel()  // prints "stop the upload"
    print(upload.isRejected)  // prints "true"
    // snippet.hide
    #expect(output.lines == ["stop the upload", "true"])
    #expect(upload.result.map { (try? $0.get()) == nil } == true)
    // snippet.end
  }

  @Test func cancelReachesTheHeadOfTheChain() {
    // snippet.cancel-upstream
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (download, resolver) = Promise<[String: Int]>.pending()
    resolver.onCancel { print("download cancelled") }

    let bitrate = download.map { config in config["bitrate"] ?? 1_000 }
    bitrate.cancel()  // prints "download cancelled"
    // snippet.hide
    #expect(output.lines == ["download cancelled"])
    #expect(download.isRejected)
    // snippet.end
  }

  @Test func sharedWorkSurvives() async throws {
    // snippet.cancel-shared
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (download, resolver) = Promise<[String: Int]>.pending()
    let fps = download.map { config in config["fps"] ?? 25 }
    let bitrate = download.map { config in config["bitrate"] ?? 1_000 }

    bitrate.cancel()  // `download` goes on: `fps` still waits for it
    resolver.fulfill(["fps": 30, "bitrate": 2_500])
    print(try await fps.value)  // prints "30"
    // snippet.hide
    #expect(output.lines == ["30"])
    await #expect(throws: CancellationError.self) { try await bitrate.value }
    // snippet.end
  }

  @Test func longWorkPollsIsCancelled() async throws {
    // snippet.cancel-polling
    let frames = Promise<Int> { resolver in
      DispatchQueue.global().async {
        var encoded = 0
        while encoded < 1_000, !resolver.isCancelled {
          encoded += 1  // encode one frame
        }
        resolver.fulfill(encoded)
      }
    }
    // snippet.hide
    #expect(try await frames.value == 1_000)
    // snippet.end
  }

  @Test func brokenPromise() async throws {
    // snippet.cancel-broken
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let settings = Promise<[String: Int]> { resolver in
      // A bug: this returns without settling, and the resolver is released.
    }

    do {
      _ = try await settings.value
    } catch PromiseError.brokenPromise {
      print("the settings can never arrive")  // prints "the settings can never arrive"
    }
    // snippet.hide
    #expect(output.lines == ["the settings can never arrive"])
    // snippet.end
  }

  /// Runs in a child process (an exit test): the handler is global, and other tests in this
  /// process install their own.
  @Test(.tags(.childProcess)) func unhandledRejectionHook() async {
    await #expect(processExitsWith: .success) {
      // snippet.cancel-unhandled
      // snippet.hide
      let output = DocOutput()
      let print = output.print
      // snippet.show
      UnhandledRejection.handler = { rejection in
        print("unhandled: \(rejection.error)")  // log it, count it, or fail a test
      }

      _ = loadSettings()  // rejected, and nobody looked
      // prints "unhandled: notFound"
      // snippet.hide
      endChildProcess(passed: output.lines == ["unhandled: notFound"])
      // snippet.end
    }
  }

  @Test func describingAPromise() async throws {
    // snippet.cancel-debug-description
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (bitrate, resolver) = Promise<Int>.pending()
    let kilobytes = bitrate.map { bitrate in bitrate / 8 }

    print(bitrate.debugDescription)
    // prints "Promise<Int>(pending, 1 callback waiting, created at DocTests/Cancellation.swift:…)"
    resolver.fulfill(2_500)
    print(bitrate.debugDescription)
    // prints "Promise<Int>(fulfilled: 2500, created at DocTests/Cancellation.swift:…)"
    // snippet.hide
    #expect(try await kilobytes.value == 312)
    let line = bitrate.creationSite.line
    #expect(
      output.lines == [
        "Promise<Int>(pending, 1 callback waiting, created at DocTests/Cancellation.swift:\(line))",
        "Promise<Int>(fulfilled: 2500, created at DocTests/Cancellation.swift:\(line))",
      ])
    // snippet.end
  }
}

/// Returns settings that are not there.
func loadSettings() -> Promise<[String: Int]> {
  Promise(error: ServiceError.notFound)
}
