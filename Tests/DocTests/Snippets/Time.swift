// The imports Docs/Time.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.time-imports
import Promises
// snippet.end
import Testing

@Suite("Docs/Time.md", .timeLimit(.minutes(1)))
struct TimeExamples {
  @Test func after() async throws {
    // snippet.time-after
    let config = Promise.after(.milliseconds(100))
      .then { loadConfig(from: "backup") }
    // snippet.hide
    #expect(try await config.value["fps"] == 30)
    // snippet.end
  }

  @Test func delay() async throws {
    // snippet.time-delay
    let config = loadConfig(from: "primary")
      .delay(.milliseconds(100))  // the rejection, too, arrives 100 ms late
    // snippet.hide
    await #expect(throws: ServiceError.serverDown) { try await config.value }
    // snippet.end
  }

  @Test func timeout() async throws {
    // snippet.time-timeout
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let (download, resolver) = Promise<[String: Int]>.pending()
    resolver.onCancel { print("download stopped") }

    do {
      _ = try await download.timeout(.milliseconds(100)).value
    } catch PromiseError.timedOut {
      print("no config in time")
    }
    // prints "no config in time" and "download stopped"
    // snippet.hide
    #expect(Set(await output.lines(count: 2)) == ["no config in time", "download stopped"])
    // snippet.end
  }

  @Test func retryWithBackoff() async throws {
    // snippet.time-retry
    // snippet.hide
    let flaky = FlakyService(failures: 2)
    // snippet.show
    let config = Promise.retry(
      attempts: 4, delay: .exponential(initial: .milliseconds(50), maximum: .seconds(2), jitter: .full)
    ) {
      flaky.loadConfig()
    }
    // snippet.hide
    #expect(try await config.value["fps"] == 30)
    #expect(flaky.callCount == 3)
    // snippet.end
  }

  @Test func retryOnlySomeErrors() async throws {
    // snippet.time-retry-should-retry
    let config = Promise.retry(attempts: 3, shouldRetry: { error in error as? ServiceError != .notFound }) {
      loadSettings()  // rejected with notFound: not retried
    }
    // snippet.hide
    await #expect(throws: ServiceError.notFound) { try await config.value }
    // snippet.end
  }

  @Test func timeoutOnVirtualTime() async throws {
    // snippet.time-virtual-timeout
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let clock = VirtualTimeScheduler()
    let (download, resolver) = Promise<[String: Int]>.pending()
    let config = download.timeout(.seconds(30), scheduler: clock)

    clock.advance(by: .seconds(29))
    print(config.isPending)  // prints "true"
    clock.advance(by: .seconds(1))
    print(config.isRejected)  // prints "true": rejected with PromiseError.timedOut
    // snippet.hide
    #expect(output.lines == ["true", "true"])
    await #expect(throws: PromiseError.self) { try await config.value }
    resolver.fulfill([:])
    // snippet.end
  }

  @Test func retryOnVirtualTime() async throws {
    // snippet.time-virtual-retry
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let flaky = FlakyService(failures: 2)
    // snippet.show
    let clock = VirtualTimeScheduler()
    let config = Promise.retry(attempts: 3, delay: .constant(.seconds(10)), scheduler: clock) {
      flaky.loadConfig()
    }

    try await clock.waitForPendingWork()  // the first attempt failed: its wait is scheduled
    clock.advance(by: .seconds(10))  // the second attempt starts, and fails
    try await clock.waitForPendingWork()
    clock.advance(by: .seconds(10))  // the third attempt succeeds
    print(try await config.value["fps"] ?? 0)  // prints "30"
    // snippet.hide
    #expect(output.lines == ["30"])
    #expect(clock.now == .seconds(20))
    // snippet.end
  }

  @Test func retryUntilSettled() async throws {
    // snippet.time-virtual-until
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let flaky = FlakyService(failures: 2)
    // snippet.show
    let clock = VirtualTimeScheduler()
    let config = Promise.retry(attempts: 3, delay: .constant(.seconds(10)), scheduler: clock) {
      flaky.loadConfig()
    }

    print(try await clock.advance(until: config)["fps"] ?? 0)  // prints "30"
    print(clock.now)  // prints "20.0 seconds"
    // snippet.hide
    #expect(output.lines == ["30", "20.0 seconds"])
    // snippet.end
  }
}
