import Dispatch
import Promises
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
  @Test func firstChain() async {
    // snippet.getting-started-first-chain
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (deviceID, resolver) = Promise<String>.pending()

    deviceID
      .map { id in "token-for-\(id)" }
      .done { token in print("got \(token)") }
      .catch { error in print("failed: \(error)") }

    resolver.fulfill("A1B2")
    // prints "got token-for-A1B2"
    // snippet.hide
    #expect(await output.lines(count: 1) == ["got token-for-A1B2"])
    // snippet.end
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
