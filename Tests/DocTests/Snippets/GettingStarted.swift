// The imports below are the ones Docs/GettingStarted.md shows: `DocImportsTests` checks that this
// file has no other (but `Testing`), so the page's code compiles with the imports it shows.
// snippet.getting-started-imports
import Dispatch  // DispatchQueue: Promises does not re-export it
import Promises
// snippet.end
import Testing

// snippet.getting-started-steps-declarations
func register(deviceID: String) -> Promise<String> {
  Promise { resolver in
    // Start callback-based work; settle the resolver when it completes.
    DispatchQueue.global().async { resolver.fulfill("token-for-\(deviceID)") }
  }
}

func fetchConfig(token: String) -> Promise<[String: Int]> {
  Promise(["bitrate": 2_500])
}
// snippet.end

@Suite("Docs/GettingStarted.md", .timeLimit(.minutes(1)))
struct GettingStartedExamples {
  @Test func firstChain() throws {
    // snippet.getting-started-first-chain
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (deviceID, resolver) = Promise<String>.pending()

    let finished = deviceID.map { id in "token-for-\(id)" }
      .done { token in print("got \(token)") }
      .catch { error in print("failed: \(error)") }

    resolver.fulfill("A1B2")
    try finished.wait(timeout: 10)  // keeps the program alive until the last step has run
    // prints "got token-for-A1B2"
    // snippet.hide
    // Not eventually: once `wait` has returned, the line is there.
    #expect(output.lines == ["got token-for-A1B2"])
    // snippet.end
  }

  @Test("Waiting on the first promise of a chain returns before the later steps have run")
  func waitingOnTheFirstPromiseIsTooEarly() throws {
    // The page says to wait on the last promise: the first is fulfilled before the steps
    // chained on it run (they are dispatched), so a program that waits on it can exit first.
    let steps = DispatchQueue(label: "held back")
    steps.suspend()
    let (first, resolver) = Promise<String>.pending()
    let last = first.map(on: steps) { id in "token-for-\(id)" }.done { _ in }
    resolver.fulfill("A1B2")
    #expect(try first.wait(timeout: 10) == "A1B2")
    #expect(last.isPending, "the steps after the first promise have not run yet")
    steps.resume()
    try last.wait(timeout: 10)
    #expect(!last.isPending)
  }

  @Test func asynchronousSteps() async throws {
    // snippet.getting-started-steps
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let bitrate = register(deviceID: "A1B2")
      .then { token in fetchConfig(token: token) }
      .map { config in config["bitrate"] ?? 1_000 }

    print(try await bitrate.value)  // prints "2500"
    // snippet.hide
    #expect(output.lines == ["2500"])
    // snippet.end
  }
}
