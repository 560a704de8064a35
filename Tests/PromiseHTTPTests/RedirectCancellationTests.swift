import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

/// Cancelling a request while FoundationNetworking redirects it.
///
/// FoundationNetworking (Swift 6.3.1) traps when a task is cancelled between asking its delegate
/// about a redirect and receiving the answer ("Received callback for HTTP redirection, but
/// we're not waiting for it"): before the fix a loop of cancelled 3-hop redirects killed the
/// process within a few iterations. The loop runs in a child process — this test binary,
/// started again with a filter — so that a crash is reported as a failure of this test and not
/// as a dead test runner.
@Suite("Cancelling requests while they are redirected", .timeLimit(.minutes(3)))
struct RedirectCancellationTests {
  /// Set in the child's environment to the number of iterations it runs.
  static let childSwitch = "PROMISEHTTP_REDIRECT_CANCEL_ITERATIONS"

  @Test func thousandsOfCancelsAtRandomOffsetsDuringRedirectsLeaveTheProcessAliveAndSettleEveryPromise()
    async throws
  {
    let iterations = 1500
    let outcome = try await Self.runChild(
      filter: "RedirectCancellationTests/childCancelsRequestsAtRandomOffsetsDuringThreeHopRedirects",
      environment: [Self.childSwitch: "\(iterations)"], limit: .seconds(150))
    let output = outcome.standardOutputText
    let tail = output.split(separator: "\n").suffix(15).joined(separator: "\n")
    #expect(!outcome.timedOut, "the child process did not finish within 150 s:\n\(tail)")
    if case .signalled = outcome.termination {
      Issue.record("the child process died (\(outcome.termination)):\n\(tail)")
    }
    #expect(outcome.isSuccess, "the child process failed (\(outcome.summary)):\n\(tail)")
    #expect(output.contains("REDIRECT-CANCEL settled \(iterations) of \(iterations)"), "\(tail)")
  }

  /// The child's loop: each iteration starts a request for a 3-hop redirect and cancels it after
  /// 0–4 ms, then checks that its promise settled (a value, or a cancellation).
  @Test(.enabled(if: ProcessInfo.processInfo.environment[childSwitch] != nil))
  func childCancelsRequestsAtRandomOffsetsDuringThreeHopRedirects() async throws {
    let iterations = Int(ProcessInfo.processInfo.environment[Self.childSwitch] ?? "") ?? 100
    try await withServer({ router in
      for hop in 1...3 {
        router.on("GET", "/r\(hop)") { _ in .respond(.redirect(to: "/r\(hop - 1)")) }
      }
      router.on("GET", "/r0") { _ in .respond(.text("done")) }
    }) { server in
      let client = server.client()
      var fulfilled = 0
      var cancelled = 0
      var settled = 0
      for _ in 0..<iterations {
        let request = client.get("r3")
        let offset = Int.random(in: 0...4_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(offset)) { request.cancel() }
        let settledInTime = await offThePool { () -> Bool? in
          do {
            _ = try request.wait(timeout: 30)
            return true
          } catch is CancellationError {
            return false
          } catch {
            return nil
          }
        }
        switch settledInTime {
        case true?: fulfilled += 1
        case false?: cancelled += 1
        case nil:
          Issue.record("a request neither succeeded nor was cancelled: \(String(describing: request.result))")
        }
        if settledInTime != nil { settled += 1 }
      }
      print(
        "REDIRECT-CANCEL settled \(settled) of \(iterations) (\(fulfilled) fulfilled, \(cancelled) cancelled)"
      )
    }
  }

  /// Runs this test binary again with `filter` and `environment` added to this process's,
  /// waits at most `limit` (then SIGTERM, and SIGKILL 5 s later), and returns how it ended, with
  /// its standard output and error together.
  static func runChild(
    filter: String, environment: [String: String], limit: Duration
  ) async throws -> ChildProcess.Outcome {
    let arguments = ["--testing-library", "swift-testing", "--filter", filter]
    let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    return try await offThePool {
      Result { () throws(ChildProcessError) in
        try ChildProcess.run(
          CommandLine.arguments[0], arguments, environment: merged, mergingStandardError: true,
          timeout: limit,
          grace: .seconds(5))
      }
    }.get()
  }
}
