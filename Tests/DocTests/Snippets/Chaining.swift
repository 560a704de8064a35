// The imports Docs/Chaining.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.chaining-imports
import Promises
// snippet.end
import Testing

@Suite("Docs/Chaining.md", .timeLimit(.minutes(1)))
struct ChainingExamples {
  @Test func mapComputesTheNextValue() async throws {
    // snippet.chaining-map
    let fps = Promise(["bitrate": 2_500, "fps": 30])
      .map { config in config["fps"] ?? 25 }
      .map { fps in Double(fps) }
    // snippet.hide
    #expect(try await fps.value == 30)
    // snippet.end
  }

  @Test func thenAdoptsAPromise() async throws {
    // snippet.chaining-then
    let bitrate = loadConfig(from: "backup")
      .then { config in Promise(config["bitrate"] ?? 1_000) }
    // snippet.hide
    #expect(try await bitrate.value == 2_500)
    // snippet.end
  }

  @Test func oneAnnotationFixesASlowStep() async throws {
    // snippet.chaining-annotation
    let budget = loadConfig(from: "backup")
      .map { config in Double(config["fps"] ?? 30) }
      .map { fps in 1_000 / fps }
      .map { (frameMs: Double) in Int(frameMs / 16.7 * 100) }
    // snippet.hide
    #expect(try await budget.value == 199)
    // snippet.end
  }

  @Test func doneUsesTheValueAndTheChainGoesOn() async throws {
    // snippet.chaining-done
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let shown = loadConfig(from: "backup")
      .done { config in print("fps \(config["fps"] ?? 0)") }
      .always { print("finished") }
    // prints "fps 30", then "finished"
    // snippet.hide
    try await shown.value
    #expect(output.lines == ["fps 30", "finished"])
    // snippet.end
  }

  @Test func rejectionSkipsTheSteps() async throws {
    // snippet.chaining-propagation
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    enum ConfigError: Error { case missingBitrate }

    let applied = Promise(["fps": 30])
      .map { config in
        guard let bitrate = config["bitrate"] else { throw ConfigError.missingBitrate }
        return bitrate
      }
      .done { bitrate in print("bitrate \(bitrate)") }  // skipped
      .catch { error in print("no config: \(error)") }
    // prints "no config: missingBitrate"
    // snippet.hide
    await #expect(throws: ConfigError.missingBitrate) { try await applied.value }
    #expect(output.lines == ["no config: missingBitrate"])
    // snippet.end
  }

  @Test func catchPassesTheOutcomeOn() async throws {
    // snippet.chaining-catch
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let config = loadConfig(from: "primary")
      .catch { error in print("logged: \(error)") }

    do {
      _ = try await config.value
    } catch {
      print("still rejected: \(error)")
    }
    // prints "logged: serverDown", then "still rejected: serverDown"
    // snippet.hide
    #expect(output.lines == ["logged: serverDown", "still rejected: serverDown"])
    // snippet.end
  }

  @Test func recoverReplacesTheError() async throws {
    // snippet.chaining-recover
    let config = loadConfig(from: "primary")
      .recover { _ in loadConfig(from: "backup") }  // a promise: try the backup server
      .recover { _ in ["bitrate": 1_000] }  // a value: the built-in default
    // snippet.hide
    #expect(try await config.value == ["bitrate": 2_500, "fps": 30])
    // snippet.end
  }

  @Test func alwaysCleansUp() async throws {
    // snippet.chaining-always
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    print("spinner on")
    loadConfig(from: "primary")
      .always { print("spinner off") }
      .catch { error in print("failed: \(error)") }
    // prints "spinner on", "spinner off", then "failed: serverDown"
    // snippet.hide
    #expect(await output.lines(count: 3) == ["spinner on", "spinner off", "failed: serverDown"])
    // snippet.end
  }

  @Test func validateRejects() async throws {
    // snippet.chaining-validate
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let bitrate = Promise(50_000)
      .validate { bitrate in bitrate <= 20_000 }

    do {
      _ = try await bitrate.value
    } catch PromiseError.validationFailed {
      print("bitrate too high")
    }
    // prints "bitrate too high"
    // snippet.hide
    #expect(output.lines == ["bitrate too high"])
    // snippet.end
  }

  @Test func whenSettledSeesTheResult() async throws {
    // snippet.chaining-when-settled
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    loadConfig(from: "backup")
      .whenSettled { result in
        switch result {
        case .success(let config): print("fps \(config["fps"] ?? 0)")
        case .failure(let error): print("failed: \(error)")
        }
      }
    // prints "fps 30"
    // snippet.hide
    #expect(await output.lines(count: 1) == ["fps 30"])
    // snippet.end
  }

  @Test func throwingStepRejects() async throws {
    // snippet.chaining-throwing-body
    let port = Promise("80a")
      .map { text in
        guard let port = Int(text) else { throw ServiceError.notFound }
        return port
      }
    // snippet.hide
    await #expect(throws: ServiceError.notFound) { try await port.value }
    // snippet.end
  }
}
