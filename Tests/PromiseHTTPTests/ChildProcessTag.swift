import Testing

extension Tag {
  /// Tests that run their body in a child process (`#expect(processExitsWith:)`), which
  /// `.ci/run` runs apart under the sanitizers: why, in Tests/PromisesTests/ChildProcessTag.swift.
  @Tag static var childProcess: Self
}
