// The imports Docs/Queues.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.queues-imports
import Dispatch
import Promises
// snippet.end
import Testing

/// A screen of an app: main-actor state, as UI objects are.
@MainActor final class RecorderScreen {
  var status = "idle"
}

@Suite("Docs/Queues.md", .timeLimit(.minutes(1)))
struct QueuesExamples {
  @Test func thenOnAQueue() async throws {
    // snippet.queues-on-queue
    let recorderQueue = DispatchQueue(label: "recorder")

    let bitrate = loadConfig(from: "backup")
      .map(on: recorderQueue) { config in
        dispatchPrecondition(condition: .onQueue(recorderQueue))
        return config["bitrate"] ?? 1_000
      }
    // snippet.hide
    #expect(try await bitrate.value == 2_500)
    // snippet.end
  }

  @Test func theDefaultQueue() {
    // snippet.queues-default
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    print(DispatchQueue.promises.label)  // prints "com.promises.default"
    // snippet.hide
    #expect(output.lines == ["com.promises.default"])
    // snippet.end
  }

  @Test func serialQueueOrder() async throws {
    // snippet.queues-serial-order
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let log = DispatchQueue(label: "log")
    let (ready, resolver) = Promise<Void>.pending()

    ready.always(on: log) { print("first") }
    ready.always(on: log) { print("second") }
    ready.always(on: log) { print("third") }
    resolver.fulfill()
    // prints "first", "second", "third": always in this order
    // snippet.hide
    #expect(await output.lines(count: 3) == ["first", "second", "third"])
    // snippet.end
  }

  @Test func concurrentQueueOrder() async throws {
    // snippet.queues-concurrent-order
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let workers = DispatchQueue(label: "workers", attributes: .concurrent)
    let (ready, resolver) = Promise<Void>.pending()

    ready.always(on: workers) { print("first") }
    ready.always(on: workers) { print("second") }
    ready.always(on: workers) { print("third") }
    resolver.fulfill()
    // prints "first", "second" and "third", in any order
    // snippet.hide
    #expect(Set(await output.lines(count: 3)) == ["first", "second", "third"])
    // snippet.end
  }

  @Test func mainQueueInAnApp() async throws {
    // snippet.queues-main
    // snippet.hide
    let screen = RecorderScreen()
    // snippet.show
    let shown = loadConfig(from: "backup")
      .done(on: .main) { config in
        MainActor.assumeIsolated {
          screen.status = "recording at \(config["bitrate"] ?? 0) kbit/s"
        }
      }
    // snippet.hide
    try await shown.value
    #expect(await screen.status == "recording at 2500 kbit/s")
    // snippet.end
  }
}

// snippet.queues-set-default
func applicationDidFinishLaunching() {
  DispatchQueue.promises = .main  // callbacks without `on:` now run on the main queue
}
// snippet.end

@Suite("Docs/Queues.md: the default queue setting", .timeLimit(.minutes(1)))
struct QueuesDefaultSettingExamples {
  /// Runs in a child process (an exit test): the setting is global to the process.
  @Test(.tags(.childProcess)) func settingTheDefaultQueueAtLaunch() async {
    await #expect(processExitsWith: .success) {
      let mainQueue = DispatchSpecificKey<Int>()
      DispatchQueue.main.setSpecific(key: mainQueue, value: 1)
      applicationDidFinishLaunching()
      let onMain = Promise(1).map { _ in
        dispatchPrecondition(condition: .onQueue(.main))
        return (DispatchQueue.getSpecific(key: mainQueue), isMainThread())
      }
      // What Docs/Queues.md says: the callback runs on the main queue, and on Linux
      // `Thread.isMainThread` does not tell (it is `false` here).
      guard let (specific, onMainThread) = try? await onMain.value else { endChildProcess(passed: false) }
      #if os(Linux)
        endChildProcess(passed: specific == 1 && !onMainThread)
      #else
        endChildProcess(passed: specific == 1)
      #endif
    }
  }
}
