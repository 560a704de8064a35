// The imports Docs/Design.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.design-imports
import Dispatch
import Promises
// snippet.end
import Testing

@Suite("Docs/Design.md", .timeLimit(.minutes(1)))
struct DesignExamples {
  @Test func neverSynchronous() async throws {
    // snippet.design-never-synchronous
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let queue = DispatchQueue(label: "ui")
    queue.async {
      Promise(42).always(on: queue) { print("callback") }
      print("after always")
    }
    // prints "after always", then "callback"
    // snippet.hide
    #expect(await output.lines(count: 2) == ["after always", "callback"])
    // snippet.end
  }

  @Test func longChain() async throws {
    // snippet.design-long-chain
    var chain = Promise(0)
    for _ in 0..<100_000 {
      chain = chain.map { $0 + 1 }
    }
    let total = try await chain.value  // 100000, on a flat stack
    // snippet.hide
    #expect(total == 100_000)
    // snippet.end
  }
}
