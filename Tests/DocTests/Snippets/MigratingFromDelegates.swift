// The imports Docs/MigratingFromDelegates.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.delegates-imports
import Dispatch
import Promises
// snippet.end
import Testing

// snippet.delegates-legacy-api
protocol ConfigConnectionDelegate: AnyObject, Sendable {
  func connection(_ connection: ConfigConnection, didReceive config: [String: Int])
  func connection(_ connection: ConfigConnection, didFailWithError error: any Error)
}
// snippet.end

/// A delegate-based download in the style of `NSURLConnection`: it starts at once, keeps its
/// delegate until it finishes, and calls it on a queue of its own.
final class ConfigConnection: @unchecked Sendable {
  // Safety: all properties are constants.
  let deviceID: String
  let delegate: any ConfigConnectionDelegate

  init(deviceID: String, delegate: any ConfigConnectionDelegate) {
    self.deviceID = deviceID
    self.delegate = delegate
    DispatchQueue.global().async { [self] in
      if deviceID.isEmpty {
        delegate.connection(self, didFailWithError: ServiceError.notFound)
      } else {
        delegate.connection(self, didReceive: ["bitrate": 2_500, "fps": 30])
      }
    }
  }
}

// snippet.delegates-adapter
/// Settles a promise from the delegate callbacks of one connection.
final class ConfigDownload: ConfigConnectionDelegate {
  let resolver: Promise<[String: Int]>.Resolver

  init(resolver: Promise<[String: Int]>.Resolver) {
    self.resolver = resolver
  }

  func connection(_ connection: ConfigConnection, didReceive config: [String: Int]) {
    resolver.fulfill(config)
  }

  func connection(_ connection: ConfigConnection, didFailWithError error: any Error) {
    resolver.reject(error)
  }
}

func fetchConfig(deviceID: String) -> Promise<[String: Int]> {
  Promise { resolver in
    _ = ConfigConnection(deviceID: deviceID, delegate: ConfigDownload(resolver: resolver))
  }
}
// snippet.end

/// The recorder of the seed story: configured, then started.
@MainActor final class Recorder {
  var bitrate = 0
  var isRecording = false
  var status = "idle"

  func apply(_ config: [String: Int]) {
    bitrate = config["bitrate"] ?? 1_000
  }

  func start() {
    isRecording = true
  }
}

// snippet.delegates-chain
@MainActor final class RecordScreen {
  let recorder = Recorder()
  let deviceID = "A1B2"

  func recordButtonPressed() {
    fetchConfig(deviceID: deviceID)
      .done(on: .main) { config in
        MainActor.assumeIsolated {
          self.recorder.apply(config)  // runs once the delegate has delivered the config
          self.recorder.start()
        }
      }
      .catch(on: .main) { error in
        MainActor.assumeIsolated { self.recorder.status = "cannot record: \(error)" }
      }
  }
}
// snippet.end

// snippet.delegates-await
extension RecordScreen {
  func recordButtonPressedAsync() async {
    do {
      let config = try await fetchConfig(deviceID: deviceID).value
      recorder.apply(config)  // the next statement runs after the config has arrived
      recorder.start()
    } catch {
      recorder.status = "cannot record: \(error)"
    }
  }
}
// snippet.end

@Suite("Docs/MigratingFromDelegates.md", .timeLimit(.minutes(1)))
struct MigratingFromDelegatesExamples {
  @Test func chainIt() async throws {
    let screen = RecordScreen()
    await screen.recordButtonPressed()
    // The chain ends on the main queue: hop through it until the recorder has started
    // (bounded by the suite's time limit).
    let recorder = screen.recorder
    while await !recorder.isRecording {
      await withCheckedContinuation { continuation in
        DispatchQueue.main.async { continuation.resume() }
      }
    }
    #expect(await recorder.isRecording)
    #expect(await recorder.bitrate == 2_500)
  }

  @Test func awaitIt() async throws {
    let screen = RecordScreen()
    await screen.recordButtonPressedAsync()
    #expect(await screen.recorder.isRecording)
    #expect(await screen.recorder.bitrate == 2_500)
  }

  @Test func waitInACommandLineTool() throws {
    // snippet.delegates-wait
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let config = try fetchConfig(deviceID: "A1B2").wait(timeout: 10)
    print("bitrate \(config["bitrate"] ?? 0)")  // prints "bitrate 2500"
    // snippet.hide
    #expect(output.lines == ["bitrate 2500"])
    // snippet.end
  }

  @Test func waitOnTheQueueItNeeds() async throws {
    // snippet.delegates-deadlock
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let ui = DispatchQueue(label: "ui")
    let (config, resolver) = Promise<[String: Int]>.pending()
    let fps = config.map(on: ui) { config in config["fps"] ?? 25 }

    ui.async {
      do {
        _ = try fps.wait(timeout: 10)  // would block the queue that `fps` needs
      } catch {
        print(error)
      }
    }
    // prints "wait(timeout:) on queue 'ui' would deadlock: the promise created at …"
    // snippet.hide
    let lines = await output.lines(count: 1)
    #expect(lines.count == 1)
    #expect(
      lines.first?.hasPrefix("wait(timeout:) on queue 'ui' would deadlock: the promise created at ") == true)
    resolver.fulfill(["fps": 30])
    #expect(try await fps.value == 30)
    // snippet.end
  }

  @Test func completionHandlers() async throws {
    // snippet.delegates-wrap
    let profile = Promise<String>.wrap { done in loadProfile(id: "A1B2", completion: done) }
    let avatar = Promise<String>.wrap { done in loadAvatar(id: "A1B2", completion: done) }
    // snippet.hide
    #expect(try await profile.value == "profile of A1B2")
    #expect(try await avatar.value == "avatar-A1B2.png")
    // snippet.end
  }

  @Test func completionHandlersByHand() async throws {
    // snippet.delegates-resolver-resolve
    let profile = Promise<String> { resolver in
      loadProfile(id: "A1B2") { profile, error in resolver.resolve(profile, error) }
    }
    // snippet.hide
    #expect(try await profile.value == "profile of A1B2")
    // snippet.end
  }
}
