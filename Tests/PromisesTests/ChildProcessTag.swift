import Testing

extension Tag {
  /// Tests that run their body in a child process (`#expect(processExitsWith:)`).
  ///
  /// Swift Testing waits for such a child by reading its output with blocking reads on two
  /// threads of the cooperative pool, for as long as the child runs — a whole test process
  /// starting up, seconds under a sanitizer. A 2-core machine has two pool threads, so every
  /// other test of the process stands still meanwhile (stack samples of CI's ThreadSanitizer run
  /// caught both threads there, and tests with 10–20 s bounds failed). `.ci/run` runs these tests
  /// in a process of their own under the sanitizers, by the names `Scripts/child-process-tests.py`
  /// finds with this tag (Swift Testing 6.3.1 has no `--filter tag:`).
  @Tag static var childProcess: Self
}
