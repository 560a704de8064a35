// The imports Docs/MigratingFromPromiseKit.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.promisekit-imports
import Dispatch  // DispatchQueue.main, as in `on: .main`
import Promises
// snippet.end
import Testing

@Suite("Docs/MigratingFromPromiseKit.md", .timeLimit(.minutes(1)))
struct MigratingFromPromiseKitExamples {
  @Test func translatedChain() async throws {
    // snippet.promisekit-chain
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    loadConfig(from: "primary")
      .recover { _ in loadConfig(from: "backup") }
      .map { config in config["fps"] ?? 25 }
      .done(on: .main) { fps in print("fps \(fps)") }
      .always { print("finished") }
      .catch { error in print("failed: \(error)") }
    // prints "fps 30", then "finished"
    // snippet.hide
    #expect(await output.lines(count: 2) == ["fps 30", "finished"])
    // snippet.end
  }

  @Test func guaranteeIsAPromise() async throws {
    // snippet.promisekit-guarantee
    let fps = loadConfig(from: "primary")
      .map { config in config["fps"] ?? 25 }
      .recover { _ in 25 }  // never rejected from here on: what PromiseKit calls a Guarantee
    // snippet.hide
    #expect(try await fps.value == 25)
    // snippet.end
  }

  @Test func catchDoesNotEndTheChain() async throws {
    // snippet.promisekit-catch
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let logged = loadConfig(from: "primary")
      .catch { error in print("logged: \(error)") }  // returns a promise with the same outcome
      .recover { _ in ["fps": 25] }
    // snippet.hide
    #expect(try await logged.value == ["fps": 25])
    #expect(output.lines == ["logged: serverDown"])
    // snippet.end
  }
}
