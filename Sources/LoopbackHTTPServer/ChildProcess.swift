#if canImport(Glibc)
  import Foundation
  import Glibc

  /// Test support: a child process started with `posix_spawn`, for the tests and the benchmarks
  /// (curl, python3, openssl, the test binary itself).
  ///
  /// Use it instead of Foundation's `Process`: `Process.run()` in swift-corelibs-foundation 6.3.1
  /// over-reads the entries of `/proc/self/fd` (`findMaximumOpenFromProcSelfFD`, fixed upstream by
  /// swiftlang/swift-corelibs-foundation#5472), which ASan reports and which can crash the process.
  ///
  /// The child starts with every signal at its default action and none blocked (whatever this
  /// process ignores or blocks, `SIGPIPE` say), with exactly the environment given, and with no
  /// descriptor of this process but its standard input, output and error: the ones it is given
  /// are `dup2`ed there, every other one is closed (`posix_spawn_file_actions_addclosefrom_np`,
  /// glibc 2.34 and later; on an older glibc only descriptors opened with `O_CLOEXEC` stay out,
  /// as every descriptor this type opens is). It is reaped with `waitpid` on its own process ID:
  /// no `SIGCHLD` handler is installed, so the children of others (Foundation, swift-testing)
  /// are left alone.
  ///
  /// ``run(_:_:environment:input:mergingStandardError:timeout:grace:)`` runs a child to its end
  /// and returns what it wrote; ``start(_:_:environment:standardInput:standardOutput:standardError:)``
  /// starts one that runs until ``terminate(grace:)``. Both block the calling thread while they
  /// wait: call them off Swift's cooperative pool.
  public final class ChildProcess: @unchecked Sendable {
    // Safety of `@unchecked Sendable`: `reaped` is read and written only while `stateLock`
    // is held, and a signal is sent only under it, so no signal reaches a reaped (and perhaps
    // reused) process ID; `input` is read, written to and closed only while `inputLock` is held.
    // `processID` is immutable.
    private let stateLock = NSLock()
    private var reaped: Termination?
    private let inputLock = NSLock()
    private var input: Int32?

    /// The child's process ID.
    public let processID: pid_t

    private init(processID: pid_t, input: Int32?) {
      self.processID = processID
      self.input = input
    }

    /// Kills the child with `SIGKILL` and reaps it if nobody has, so that it leaves no zombie,
    /// and closes the pipe to its standard input.
    deinit {
      if let input { close(input) }
      if reaped == nil {
        kill(processID, SIGKILL)
        var status: Int32 = 0
        while waitpid(processID, &status, 0) == -1 && errno == EINTR {}
      }
    }
  }

  // MARK: - Values

  extension ChildProcess {
    /// How a child process ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
      /// It exited with this status (0 is success).
      case exited(Int32)
      /// A signal killed it (`SIGKILL` is 9).
      case signalled(Int32)
      /// Something else in this process reaped it first (`waitpid` failed with `ECHILD`), so
      /// how it ended is unknown.
      case unknown

      /// Returns whether the child exited with status 0.
      public var isSuccess: Bool { self == .exited(0) }

      /// Returns a readable description such as `exited with status 3` or `killed by signal 9 (SIGKILL)`.
      public var description: String {
        switch self {
        case .exited(let status): "exited with status \(status)"
        case .signalled(let signal): "killed by signal \(signal) (\(Self.name(of: signal)))"
        case .unknown: "reaped elsewhere (exit status unknown)"
        }
      }

      /// Decodes a status from `waitpid` (a child not traced nor stopped: it exited or was killed).
      init(waitStatus status: Int32) {
        let signal = status & 0x7f
        self = signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
      }

      private static func name(of signal: Int32) -> String {
        switch signal {
        case SIGHUP: "SIGHUP"
        case SIGINT: "SIGINT"
        case SIGQUIT: "SIGQUIT"
        case SIGILL: "SIGILL"
        case SIGTRAP: "SIGTRAP"
        case SIGABRT: "SIGABRT"
        case SIGBUS: "SIGBUS"
        case SIGFPE: "SIGFPE"
        case SIGKILL: "SIGKILL"
        case SIGSEGV: "SIGSEGV"
        case SIGPIPE: "SIGPIPE"
        case SIGALRM: "SIGALRM"
        case SIGTERM: "SIGTERM"
        default: "signal \(signal)"
        }
      }
    }

    /// What ``ChildProcess/run(_:_:environment:input:mergingStandardError:timeout:grace:)`` saw:
    /// how the child ended and what it wrote.
    public struct Outcome: Sendable {
      /// How the child ended.
      public let termination: Termination
      /// Everything the child wrote to its standard output (and standard error, if merged).
      public let standardOutput: Data
      /// Everything the child wrote to its standard error (empty if merged into standard output).
      public let standardError: Data
      /// Whether the time ran out, so that the child was sent `SIGTERM` (and `SIGKILL` after the
      /// grace period if it was still running then).
      public let timedOut: Bool

      /// Returns whether the child exited with status 0 in time.
      public var isSuccess: Bool { termination.isSuccess && !timedOut }

      /// Returns the standard output decoded as UTF-8 (invalid bytes replaced).
      public var standardOutputText: String { String(decoding: standardOutput, as: UTF8.self) }

      /// Returns the standard error decoded as UTF-8 (invalid bytes replaced).
      public var standardErrorText: String { String(decoding: standardError, as: UTF8.self) }

      /// Returns how the child ended, for failure messages: `exited with status 3`, or
      /// `did not finish within 5 seconds; killed by signal 15 (SIGTERM)`.
      public var summary: String {
        timedOut ? "did not finish in time; \(termination)" : termination.description
      }
    }

    /// Where a started child's standard input comes from.
    public enum Input: Sendable {
      /// `/dev/null`: the child reads end of file at once.
      case null
      /// A pipe written with ``ChildProcess/write(_:)`` and closed with
      /// ``ChildProcess/closeStandardInput()`` (or when the `ChildProcess` is released).
      case pipe
    }

    /// Where a started child's standard output or standard error goes.
    public enum Output: Sendable {
      /// `/dev/null`.
      case discard
      /// Where this process's own goes.
      case inherit
      /// To a pipe that a thread of its own reads: `body` gets each piece in order, then an empty
      /// `Data` at the end (once every process holding the pipe has exited or closed it).
      case stream(@Sendable (Data) -> Void)
      /// For standard error only: the same pipe or file as standard output, in the order written.
      /// For standard output it means ``inherit``.
      case standardOutput
    }
  }

  /// Why a child process could not be started or talked to.
  public struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    /// The system call that failed, for example `posix_spawn` or `write`.
    public let operation: String
    /// The executable the child runs (or was to run).
    public let executable: String
    /// The error number the call returned or left in `errno` (`ENOENT`: no such executable).
    public let code: Int32

    /// Returns a readable description such as `posix_spawn(/usr/bin/nope) failed: No such file or directory (errno 2)`.
    public var description: String {
      "\(operation)(\(executable)) failed: \(String(cString: strerror(code))) (errno \(code))"
    }
  }

  // MARK: - Running to completion

  extension ChildProcess {
    /// Runs `executable` with `arguments` until it exits, and returns how it ended and what it
    /// wrote to its standard output and standard error (each captured whole, read concurrently
    /// so a child that fills both pipes never blocks).
    ///
    /// `input` is written to the child's standard input as it reads it, which is then closed;
    /// without it the child reads `/dev/null`. When `timeout` has passed the child is sent
    /// `SIGTERM`, and `SIGKILL` after `grace` more; the outcome says so
    /// (``Outcome/timedOut``) and holds what the child wrote until then. If the child exits
    /// while a process it started still holds its output open, what is in the pipes then is
    /// returned without waiting for that process. Blocks the calling thread.
    /// - Parameters:
    ///   - executable: The path of the program (not looked up on `PATH`).
    ///   - arguments: Its arguments, without the program's name (`argv[0]` is `executable`).
    ///   - environment: Its whole environment (by default this process's).
    ///   - input: What it reads on its standard input, or `nil` for `/dev/null`.
    ///   - mergingStandardError: Whether its standard error goes into the standard output
    ///     pipe (interleaved in the order written) instead of a pipe of its own.
    ///   - timeout: How long it may run.
    ///   - grace: How long it has to exit after `SIGTERM` before `SIGKILL`.
    /// - Returns: How it ended and what it wrote.
    /// - Throws: ``ChildProcessError`` when it cannot be started (no such executable, say).
    public static func run(
      _ executable: String, _ arguments: [String] = [],
      environment: [String: String] = ProcessInfo.processInfo.environment, input: Data? = nil,
      mergingStandardError: Bool = false, timeout: Duration, grace: Duration = .seconds(2)
    ) throws(ChildProcessError) -> Outcome {
      let clock = ContinuousClock()
      let deadline = clock.now + timeout
      let output = try makePipe(for: executable)
      var errors: (read: Int32, write: Int32)? = nil
      var feed: (read: Int32, write: Int32)? = nil
      do {
        if !mergingStandardError { errors = try makePipe(for: executable) }
        if input != nil { feed = try makePipe(for: executable) }
      } catch {
        for fd in [output.read, output.write, errors?.read, errors?.write].compactMap({ $0 }) { close(fd) }
        throw error
      }
      let child: ChildProcess
      do {
        defer {
          // The child's ends: it has its copies (or failed to start).
          for fd in [output.write, errors?.write, feed?.read].compactMap({ $0 }) { close(fd) }
        }
        child = try spawn(
          executable, arguments, environment: environment,
          standardInput: feed.map { .descriptor($0.read) } ?? .null,
          standardOutput: .descriptor(output.write),
          standardError: errors.map { .descriptor($0.write) } ?? .sameAsOutput, keepingInput: nil)
      } catch {
        for fd in [output.read, errors?.read, feed?.write].compactMap({ $0 }) { close(fd) }
        throw error
      }
      var session = RunSession(
        output: output.read, errors: errors?.read, input: feed?.write, pending: input ?? Data())
      let (termination, timedOut) = session.pump(child, deadline: deadline, grace: grace, clock: clock)
      return Outcome(
        termination: termination, standardOutput: session.outputData, standardError: session.errorData,
        timedOut: timedOut)
    }
  }

  /// The pipes of one ``ChildProcess/run(_:_:environment:input:mergingStandardError:timeout:grace:)``:
  /// read and written with `poll` on the calling thread until the child has closed its output or
  /// exited.
  private struct RunSession {
    var output: Int32?
    var errors: Int32?
    var input: Int32?
    var pending: Data
    var written = 0
    var outputData = Data()
    var errorData = Data()

    init(output: Int32, errors: Int32?, input: Int32?, pending: Data) {
      self.output = output
      self.errors = errors
      self.input = input
      self.pending = pending
      for fd in [output, errors, input].compactMap({ $0 }) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      }
      if pending.isEmpty { closeInput() }
    }

    /// Moves bytes until the child has exited and what it left in the pipes is read.
    ///
    /// Sends `SIGTERM` at `deadline` and `SIGKILL` `grace` later. Returns how the child ended
    /// and whether the deadline passed. Every pipe is closed when it returns.
    mutating func pump(
      _ child: ChildProcess, deadline: ContinuousClock.Instant, grace: Duration, clock: ContinuousClock
    ) -> (ChildProcess.Termination, timedOut: Bool) {
      var killAt: ContinuousClock.Instant? = nil
      var timedOut = false
      var nap = Duration.milliseconds(1)
      let mask = SIGPIPEMask()
      defer {
        mask.restore()
        closeInput()
        for fd in [output, errors].compactMap({ $0 }) { close(fd) }
        output = nil
        errors = nil
      }
      while true {
        if let termination = child.reapIfExited() {
          // What it wrote is in the pipes (a process it started may still hold them open).
          drain()
          return (termination, timedOut)
        }
        let now = clock.now
        if !timedOut && now >= deadline {
          timedOut = true
          child.send(SIGTERM)
          killAt = now + grace
        } else if let at = killAt, now >= at {
          child.send(SIGKILL)
          killAt = nil
        }
        var fds = [output, errors].compactMap { $0 }.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        if let input { fds.append(pollfd(fd: input, events: Int16(POLLOUT), revents: 0)) }
        // With pipes open, wake at least every 50 ms to see whether the child exited while a
        // process it started holds them; without, check for its exit after 1 ms, then less
        // often, every 20 ms at most (as CPython's `Popen.wait(timeout)`).
        var wait = fds.isEmpty ? nap : .milliseconds(50)
        nap = min(nap * 2, .milliseconds(20))
        if let next = killAt ?? (timedOut ? nil : deadline) { wait = min(wait, next - now) }
        let ready = poll(&fds, nfds_t(fds.count), Int32(max(1, wait.milliseconds)))
        guard ready > 0 else { continue }
        for entry in fds where entry.revents != 0 {
          if entry.fd == input {
            feedInput()
          } else {
            read(from: entry.fd, untilBlocked: false)
          }
        }
      }
    }

    /// Reads whatever is in the output pipes now, without waiting.
    private mutating func drain() {
      for fd in [output, errors].compactMap({ $0 }) { read(from: fd, untilBlocked: true) }
    }

    /// Reads a piece from `fd` (or every piece there, `untilBlocked`); closes it at its end.
    private mutating func read(from fd: Int32, untilBlocked: Bool) {
      var buffer = [UInt8](repeating: 0, count: 64 << 10)
      repeat {
        let count = buffer.withUnsafeMutableBytes { SystemCalls.read(fd, $0.baseAddress, $0.count) }
        if count > 0 {
          if fd == output {
            outputData.append(contentsOf: buffer[0..<count])
          } else {
            errorData.append(contentsOf: buffer[0..<count])
          }
          continue
        }
        if count < 0 && errno == EINTR { continue }
        if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
        // End of file, or an error that ends the data.
        close(fd)
        if fd == output { output = nil } else { errors = nil }
        return
      } while untilBlocked
    }

    /// Writes the next piece of the input; closes the pipe once all is written or the child
    /// stopped reading (`EPIPE`: it closed its end or exited).
    private mutating func feedInput() {
      guard let input else { return }
      let piece = pending[(pending.startIndex + written)...].prefix(64 << 10)
      let count = piece.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
      if count > 0 {
        written += count
        if written == pending.count { closeInput() }
      } else if count < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK {
        closeInput()
      }
    }

    private mutating func closeInput() {
      if let input { close(input) }
      input = nil
    }
  }

  // MARK: - Long-running children

  extension ChildProcess {
    /// Starts `executable` with `arguments` and returns at once; it runs until it exits or
    /// ``terminate(grace:)``.
    ///
    /// Keep the returned object while the child should run: releasing it kills the child
    /// (`SIGKILL`) and reaps it, if nobody has. A ``Output/stream(_:)`` output is read on a
    /// thread of its own until the pipe ends.
    /// - Parameters:
    ///   - executable: The path of the program (not looked up on `PATH`).
    ///   - arguments: Its arguments, without the program's name (`argv[0]` is `executable`).
    ///   - environment: Its whole environment (by default this process's).
    ///   - standardInput: `/dev/null`, or a pipe for ``write(_:)``.
    ///   - standardOutput: Where its standard output goes.
    ///   - standardError: Where its standard error goes.
    /// - Returns: The running child.
    /// - Throws: ``ChildProcessError`` when it cannot be started (no such executable, say).
    public static func start(
      _ executable: String, _ arguments: [String] = [],
      environment: [String: String] = ProcessInfo.processInfo.environment, standardInput: Input = .null,
      standardOutput: Output = .inherit, standardError: Output = .inherit
    ) throws(ChildProcessError) -> ChildProcess {
      var opened: [Int32] = []  // closed on failure
      var childEnds: [Int32] = []  // closed in this process once the child has them
      var readers: [(fd: Int32, body: @Sendable (Data) -> Void)] = []
      func destination(_ output: Output) throws(ChildProcessError) -> Redirection {
        switch output {
        case .discard: return .null
        case .inherit, .standardOutput: return .inherit
        case .stream(let body):
          let pipe = try makePipe(for: executable)
          opened += [pipe.read, pipe.write]
          childEnds.append(pipe.write)
          readers.append((pipe.read, body))
          return .descriptor(pipe.write)
        }
      }
      do {
        var input: Redirection = .null
        var inputEnd: Int32? = nil
        if case .pipe = standardInput {
          let pipe = try makePipe(for: executable)
          opened += [pipe.read, pipe.write]
          childEnds.append(pipe.read)
          input = .descriptor(pipe.read)
          inputEnd = pipe.write
        }
        let output = try destination(standardOutput)
        let errors: Redirection
        if case .standardOutput = standardError {
          errors = .sameAsOutput
        } else {
          errors = try destination(standardError)
        }
        let child = try spawn(
          executable, arguments, environment: environment, standardInput: input, standardOutput: output,
          standardError: errors, keepingInput: inputEnd)
        for fd in childEnds { close(fd) }
        for (fd, body) in readers {
          let thread = Thread {
            _ = readPieces(of: fd, pieceSize: 64 << 10) { body(Data($0)) }
            close(fd)
            body(Data())
          }
          thread.name = "ChildProcess \(child.processID) output"
          thread.start()
        }
        return child
      } catch {
        for fd in opened { close(fd) }
        throw error
      }
    }

    /// Writes `data` to the child's standard input pipe, all of it, blocking while the pipe is
    /// full.
    ///
    /// A child that has exited or closed its input makes it throw `EPIPE` (never `SIGPIPE`:
    /// the signal is blocked on the calling thread while it writes).
    /// - Throws: ``ChildProcessError`` when the write fails, or the input is not a pipe or is
    ///   closed (`EBADF`).
    public func write(_ data: Data) throws(ChildProcessError) {
      inputLock.lock()
      defer { inputLock.unlock() }
      guard let input else {
        throw ChildProcessError(operation: "write", executable: "process \(processID)", code: EBADF)
      }
      let mask = SIGPIPEMask()
      defer { mask.restore() }
      var offset = 0
      while offset < data.count {
        let count = data[(data.startIndex + offset)...].withUnsafeBytes {
          SystemCalls.write(input, $0.baseAddress, $0.count)
        }
        if count >= 0 {
          offset += count
        } else if errno != EINTR {
          throw ChildProcessError(operation: "write", executable: "process \(processID)", code: errno)
        }
      }
    }

    /// Closes the child's standard input pipe, so that it reads end of file; does nothing if it
    /// is closed or not a pipe.
    public func closeStandardInput() {
      inputLock.lock()
      defer { inputLock.unlock() }
      if let input { close(input) }
      input = nil
    }

    /// Waits at most `timeout` for the child to exit; returns how it ended, or `nil` if it is
    /// still running.
    ///
    /// Blocks the calling thread, checking every few milliseconds (there is no `SIGCHLD`
    /// handler to wake it). Any number of threads may wait.
    public func wait(timeout: Duration) -> Termination? {
      let clock = ContinuousClock()
      return waitForExit(until: clock.now + timeout, clock: clock)
    }

    /// Stops the child and returns how it ended.
    ///
    /// Sends `SIGTERM`, waits at most `grace` for it to exit, then sends `SIGKILL` and waits
    /// again (`nil` only if it still had not exited 10 s after `SIGKILL`). Returns at once if it
    /// has already exited.
    @discardableResult
    public func terminate(grace: Duration = .seconds(5)) -> Termination? {
      send(SIGTERM)
      if let ended = wait(timeout: grace) { return ended }
      send(SIGKILL)
      return wait(timeout: .seconds(10))
    }

    /// Returns how the child ended, or `nil` if it is still running (without waiting).
    public var termination: Termination? { reapIfExited() }

    /// Whether a child gets none of this process's descriptors but its standard three.
    ///
    /// `true` with glibc 2.34 and later (`posix_spawn_file_actions_addclosefrom_np`); where it
    /// is `false`, a descriptor this process opened without `O_CLOEXEC` is inherited.
    public static var closesUnrelatedDescriptors: Bool { addCloseFrom != nil }
  }

  // MARK: - Spawning and reaping

  extension ChildProcess {
    /// What one of the child's standard descriptors is.
    fileprivate enum Redirection: Equatable {
      case null
      case inherit
      /// Whatever the child's standard output is (for standard error: `dup2(1, 2)`).
      case sameAsOutput
      case descriptor(Int32)
    }

    /// Returns a new pipe whose two ends are close-on-exec (`pipe2(O_CLOEXEC)`, atomically, so
    /// no child another thread starts meanwhile inherits them).
    fileprivate static func makePipe(
      for executable: String
    ) throws(ChildProcessError) -> (read: Int32, write: Int32) {
      var fds: [Int32] = [-1, -1]
      guard closeOnExecPipe(&fds, O_CLOEXEC) == 0 else {
        throw ChildProcessError(operation: "pipe2", executable: executable, code: errno)
      }
      return (fds[0], fds[1])
    }

    /// Starts the child with `posix_spawn`; `keepingInput` is this process's end of its input pipe.
    fileprivate static func spawn(
      _ executable: String, _ arguments: [String], environment: [String: String],
      standardInput: Redirection, standardOutput: Redirection, standardError: Redirection,
      keepingInput: Int32?
    ) throws(ChildProcessError) -> ChildProcess {
      var actions = posix_spawn_file_actions_t()
      posix_spawn_file_actions_init(&actions)
      defer { posix_spawn_file_actions_destroy(&actions) }
      // In this order: standard error may copy standard output once it is set up.
      let targets = [
        (STDIN_FILENO, standardInput, O_RDONLY), (STDOUT_FILENO, standardOutput, O_WRONLY),
        (STDERR_FILENO, standardError, O_WRONLY),
      ]
      for (target, redirection, mode) in targets {
        switch redirection {
        case .inherit: break
        case .sameAsOutput: posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, target)
        case .null: posix_spawn_file_actions_addopen(&actions, target, "/dev/null", mode, 0)
        case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, target)
        }
      }
      if let closeFrom = addCloseFrom { _ = closeFrom(&actions, STDERR_FILENO + 1) }

      var attributes = posix_spawnattr_t()
      posix_spawnattr_init(&attributes)
      defer { posix_spawnattr_destroy(&attributes) }
      var none = sigset_t()
      sigemptyset(&none)
      var all = sigset_t()
      sigfillset(&all)
      sigdelset(&all, SIGKILL)
      sigdelset(&all, SIGSTOP)
      posix_spawnattr_setsigmask(&attributes, &none)
      posix_spawnattr_setsigdefault(&attributes, &all)
      posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

      let argv = ([executable] + arguments).map { strdup($0) } + [nil]
      let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
      defer { for pointer in argv + envp { free(pointer) } }
      var pid: pid_t = 0
      let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
      guard result == 0 else {
        throw ChildProcessError(operation: "posix_spawn", executable: executable, code: result)
      }
      return ChildProcess(processID: pid, input: keepingInput)
    }

    /// Sends `signal` to the child unless it has been reaped.
    fileprivate func send(_ signal: Int32) {
      stateLock.lock()
      defer { stateLock.unlock() }
      if reaped == nil { kill(processID, signal) }
    }

    /// Reaps the child if it has exited (without waiting); returns how it ended, or `nil`.
    fileprivate func reapIfExited() -> Termination? {
      stateLock.lock()
      defer { stateLock.unlock() }
      if let reaped { return reaped }
      var status: Int32 = 0
      while true {
        let result = waitpid(processID, &status, WNOHANG)
        if result == processID {
          reaped = Termination(waitStatus: status)
        } else if result == -1 && errno == EINTR {
          continue
        } else if result == -1 {
          reaped = .unknown
        }
        return reaped
      }
    }

    /// Waits until the child has exited, at most until `deadline`, checking after 1 ms, then
    /// less often, every 20 ms at most (as CPython's `Popen.wait(timeout)`).
    fileprivate func waitForExit(until deadline: ContinuousClock.Instant, clock: ContinuousClock)
      -> Termination?
    {
      var nap = Duration.milliseconds(1)
      while true {
        if let ended = reapIfExited() { return ended }
        let now = clock.now
        if now >= deadline { return nil }
        _ = poll(nil, 0, Int32(max(1, min(nap, deadline - now).milliseconds)))
        nap = min(nap * 2, .milliseconds(20))
      }
    }
  }

  /// Blocks `SIGPIPE` on the calling thread, so that a write to a pipe whose reader has gone
  /// fails with `EPIPE` instead of killing the process; ``restore()`` discards a `SIGPIPE`
  /// that the writes raised and puts the thread's mask back.
  private struct SIGPIPEMask {
    private var previous = sigset_t()
    private let wasPending: Bool

    init() {
      var pipeOnly = sigset_t()
      sigemptyset(&pipeOnly)
      sigaddset(&pipeOnly, SIGPIPE)
      var pending = sigset_t()
      sigpending(&pending)
      wasPending = sigismember(&pending, SIGPIPE) == 1
      pthread_sigmask(SIG_BLOCK, &pipeOnly, &previous)
    }

    func restore() {
      var pipeOnly = sigset_t()
      sigemptyset(&pipeOnly)
      sigaddset(&pipeOnly, SIGPIPE)
      var pending = sigset_t()
      sigpending(&pending)
      if !wasPending && sigismember(&pending, SIGPIPE) == 1 {
        var zero = timespec()
        while sigtimedwait(&pipeOnly, nil, &zero) == -1 && errno == EINTR {}
      }
      var previous = previous
      pthread_sigmask(SIG_SETMASK, &previous, nil)
    }
  }

  extension Duration {
    /// The whole milliseconds in this duration, rounded up, at most `Int32.max`.
    fileprivate var milliseconds: Int {
      let (seconds, attoseconds) = components
      guard seconds < Int64(Int32.max / 1000) else { return Int(Int32.max) }
      return Int(seconds) * 1000 + Int((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
  }

  // glibc declares `pipe2` and `posix_spawn_file_actions_addclosefrom_np` only under
  // `_GNU_SOURCE`, which Swift's Glibc module is not built with: they are looked up by name.

  private typealias Pipe2Function = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
  private typealias AddCloseFromFunction =
    @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32

  /// Returns the address of the C library function `name`, or `nil` if it has none.
  private func libcFunction(_ name: String) -> UnsafeMutableRawPointer? {
    dlsym(dlopen(nil, RTLD_NOW), name)
  }

  /// `pipe2(2)` (glibc 2.9 and later).
  private let pipe2Function: Pipe2Function? = libcFunction("pipe2").map {
    unsafeBitCast($0, to: Pipe2Function.self)
  }

  /// `posix_spawn_file_actions_addclosefrom_np(3)` (glibc 2.34 and later), or `nil`.
  private let addCloseFrom: AddCloseFromFunction? = libcFunction("posix_spawn_file_actions_addclosefrom_np")
    .map { unsafeBitCast($0, to: AddCloseFromFunction.self) }

  /// Makes a pipe whose ends have `flags` (`O_CLOEXEC`): with `pipe2`, or `pipe` and `fcntl`
  /// where there is no `pipe2`.
  private func closeOnExecPipe(_ fds: inout [Int32], _ flags: Int32) -> Int32 {
    if let pipe2Function { return pipe2Function(&fds, flags) }
    guard pipe(&fds) == 0 else { return -1 }
    for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    return 0
  }
#endif
