import Foundation
import Testing

extension Tag {
  /// Tests that run their body in a child process (`#expect(processExitsWith:)`), which
  /// `.ci/run` runs apart under the sanitizers: why, in Tests/PromisesTests/ChildProcessTag.swift.
  @Tag static var childProcess: Self
}

/// Ends an exit test's child process with status 0 when `passed`, else 1.
///
/// Here, not in the snippet files: `exit` comes from Foundation (or Glibc), which the pages
/// whose exit tests call it do not show.
func endChildProcess(passed: Bool) -> Never {
  exit(passed ? 0 : 1)
}

/// Whether the calling thread is the process's main thread, as Foundation tells it.
func isMainThread() -> Bool {
  Thread.isMainThread
}
