import Foundation
import LoopbackHTTPServer
import Testing

/// The command-line tools the TLS tests run: `openssl` makes certificates, `python3` serves them.
enum TLSTools {
  /// The path of `openssl` on `PATH`, if installed.
  static let openssl = find("openssl")
  /// The path of `python3` on `PATH`, if installed.
  static let python = find("python3")
  /// Whether both are installed. CI fails when they are not (`.ci/run`), so there the TLS tests run.
  static let available = openssl != nil && python != nil

  private static func find(_ tool: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    return path.split(separator: ":").map { "\($0)/\(tool)" }.first {
      FileManager.default.isExecutableFile(atPath: $0)
    }
  }
}

/// Why a TLS fixture could not be set up.
struct TLSFixtureError: Error, CustomStringConvertible {
  let description: String
}

/// Runs `executable` with `arguments` and waits for it to exit, at most `timeout`.
///
/// Blocks the calling thread: call it through `offThePool`.
private func run(_ executable: String, _ arguments: [String], timeout: Duration = .seconds(60)) throws {
  let outcome = try ChildProcess.run(executable, arguments, mergingStandardError: true, timeout: timeout)
  guard !outcome.timedOut else {
    throw TLSFixtureError(description: "\(executable) \(arguments) did not finish within \(timeout)")
  }
  guard outcome.isSuccess else {
    throw TLSFixtureError(
      description: "\(executable) failed (\(outcome.termination)): \(outcome.standardOutputText)")
  }
}

extension Duration {
  fileprivate var seconds: Double {
    Double(components.seconds) + Double(components.attoseconds) / 1e18
  }
}

/// A self-signed certificate and its key, made by `openssl` in a temporary directory.
struct TestCertificate {
  let certificate: URL
  let key: URL

  /// Makes a certificate for `commonName` with the subject alternative names given
  /// (`"DNS:localhost,IP:127.0.0.1"`), valid for a day, in `directory`.
  static func make(commonName: String, alternativeNames: String, in directory: URL) throws -> TestCertificate
  {
    let made = TestCertificate(
      certificate: directory.appendingPathComponent("\(commonName).pem"),
      key: directory.appendingPathComponent("\(commonName).key"))
    try run(
      TLSTools.openssl ?? "openssl",
      [
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=\(commonName)",
        "-addext", "subjectAltName=\(alternativeNames)", "-keyout", made.key.path, "-out",
        made.certificate.path,
      ])
    return made
  }
}

/// Certificates signed by an authority of the tests' own, made with `openssl` in a directory.
enum TLSFixtures {
  /// Runs `openssl` with `arguments`, where each `@name` is the path of `name` in `directory`.
  ///
  /// Blocks the calling thread: call it through `offThePool`.
  static func openssl(_ arguments: [String], in directory: URL) throws {
    try run(
      TLSTools.openssl ?? "openssl",
      arguments.map { $0.hasPrefix("@") ? directory.appendingPathComponent(String($0.dropFirst())).path : $0 }
    )
  }

  /// An authority (self-signed, valid for two days) and a certificate for localhost and
  /// 127.0.0.1 that it signed with `openssl ca`, valid for `leafValidity` (`openssl ca`
  /// arguments: `["-days", "1"]`, or explicit `-startdate` and `-enddate`).
  ///
  /// Blocks the calling thread: call it through `offThePool`.
  static func chain(
    in directory: URL, leafValidity: [String] = ["-days", "1"]
  ) throws -> (authority: TestCertificate, leaf: TestCertificate) {
    let authority = TestCertificate(
      certificate: directory.appendingPathComponent("ca.pem"), key: directory.appendingPathComponent("ca.key")
    )
    let leaf = TestCertificate(
      certificate: directory.appendingPathComponent("leaf.pem"),
      key: directory.appendingPathComponent("leaf.key"))
    try openssl(
      [
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Test CA", "-keyout",
        "@ca.key",
        "-out", "@ca.pem",
      ], in: directory)
    try openssl(
      [
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-addext",
        "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", "@leaf.key", "-out", "@leaf.csr",
      ], in: directory)
    let config = """
      [ca]
      default_ca = authority
      [authority]
      database = \(directory.appendingPathComponent("index.txt").path)
      new_certs_dir = \(directory.path)
      serial = \(directory.appendingPathComponent("serial").path)
      default_md = sha256
      policy = anything
      copy_extensions = copy
      [anything]
      commonName = supplied
      """
    try Data(config.utf8).write(to: directory.appendingPathComponent("ca.cnf"))
    try Data().write(to: directory.appendingPathComponent("index.txt"))
    try Data("01\n".utf8).write(to: directory.appendingPathComponent("serial"))
    try openssl(
      [
        "ca", "-batch", "-config", "@ca.cnf", "-cert", "@ca.pem", "-keyfile", "@ca.key", "-in", "@leaf.csr",
        "-out", "@leaf.pem", "-notext",
      ] + leafValidity, in: directory)
    return (authority, leaf)
  }

  /// A `chain(in:)` whose certificate for 127.0.0.1 expired in 2020 (explicit dates).
  static func expiredChain(in directory: URL) throws -> (authority: TestCertificate, leaf: TestCertificate) {
    try chain(in: directory, leafValidity: ["-startdate", "20200101000000Z", "-enddate", "20200201000000Z"])
  }
}

/// The lines a child process writes to its standard output, collected as they arrive.
final class Lines: @unchecked Sendable {
  // Safety of `@unchecked Sendable`: `pending`, `lines` and `ended` are read and written only
  // while `condition` is locked.
  private let condition = NSCondition()
  private var pending = Data()
  private var lines: [String] = []
  private var ended = false

  /// Adds bytes read from the pipe; empty data means the end of the output.
  func receive(_ data: Data) {
    condition.lock()
    if data.isEmpty { ended = true }
    pending.append(data)
    while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
      lines.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
      pending = Data(pending[(newline + 1)...])
    }
    condition.broadcast()
    condition.unlock()
  }

  /// How many lines have arrived.
  var count: Int {
    condition.lock()
    defer { condition.unlock() }
    return lines.count
  }

  /// Every line so far, for failure messages.
  var all: [String] {
    condition.lock()
    defer { condition.unlock() }
    return lines
  }

  /// Waits, at most `timeout`, for a line at `index` or later that starts with `prefix`.
  func first(from index: Int, withPrefix prefix: String, timeout: Duration) -> String? {
    let end = Date().addingTimeInterval(timeout.seconds)
    condition.lock()
    defer { condition.unlock() }
    while true {
      if let line = lines.dropFirst(index).first(where: { $0.hasPrefix(prefix) }) { return line }
      if ended || !condition.wait(until: end) { return nil }
    }
  }
}

/// A `python3 -c SCRIPT` child whose standard output and error are collected line by line.
enum PythonProcess {
  /// Starts the process and returns it, with a pipe to its standard input (it runs until that
  /// closes, if the script says so), and its output lines; its standard error joins them unless
  /// `keepingStandardError` (then it goes where the tests' own goes).
  static func start(
    script: String, arguments: [String] = [], keepingStandardError: Bool = false
  ) throws -> (ChildProcess, Lines) {
    let output = Lines()
    do {
      let process = try ChildProcess.start(
        TLSTools.python ?? "python3", ["-c", script] + arguments, standardInput: .pipe,
        standardOutput: .stream { output.receive($0) },
        standardError: keepingStandardError ? .inherit : .standardOutput)
      return (process, output)
    } catch {
      throw TLSFixtureError(description: "python3 did not start: \(error)")
    }
  }
}

/// An HTTPS server on 127.0.0.1, a python3 process serving a certificate made by the test.
///
/// It counts the TCP connections it accepts (handshakes that fail included) and answers every
/// request that gets through the handshake with `200 OK` and the body "hello over TLS". It exits
/// when its standard input closes, so it does not outlive the tests even if they crash.
final class TLSServer: Sendable {
  /// The port it listens on.
  let port: Int
  private let process: ChildProcess
  /// Everything the server printed, line by line.
  let output: Lines

  /// Python lines that make `print` write each line whole, under a lock: the built-in print
  /// writes the text and its line end apart, and two threads' lines interleaved
  /// ("failedconnections 3", which `connections()` could not read). Put after the imports.
  static let lockedPrint = """
    lock = threading.Lock()
    def print(*parts, flush=True):
        with lock:
            sys.stdout.write(" ".join(str(part) for part in parts) + "\\n")
            sys.stdout.flush()
    """

  /// The server's program: answers every request with "hello over TLS" and prints "request
  /// LINE".
  ///
  /// With `authorityPath`, it requires a client certificate signed by the authority in that PEM
  /// file, answers "hello CN" with the common name of the certificate it got, and prints
  /// "request LINE | CN". With `maximumTLS12`, it speaks TLS 1.2 at most. With
  /// `reportingHowClientsClose`, it reads on after each answer and prints how the client closed:
  /// "closed with close_notify" (TLS's alert, then the end of the stream), "closed without
  /// close_notify" (the stream just ended) or "closed: REASON".
  static func script(
    clientsSignedBy authorityPath: String? = nil, maximumTLS12: Bool = false,
    reportingHowClientsClose: Bool = false
  ) -> String {
    var setUp: [String] = []
    if let authorityPath {
      setUp += [
        "context.verify_mode = ssl.CERT_REQUIRED",
        "context.load_verify_locations(\(pythonString(authorityPath)))",
      ]
    }
    if maximumTLS12 { setUp.append("context.maximum_version = ssl.TLSVersion.TLSv1_2") }
    // Python lines inside the `with` block, 12 spaces in.
    let answer =
      authorityPath == nil
      ? [
        #"print("request", head.split(b"\r\n")[0].decode("latin-1"))"#,
        #"body = b"hello over TLS""#,
      ]
      : [
        #"subject = dict(field[0] for field in tls.getpeercert()["subject"])"#,
        #"name = subject.get("commonName", "?")"#,
        #"print("request", head.split(b"\r\n")[0].decode("latin-1"), "|", name)"#,
        #"body = ("hello " + name).encode()"#,
      ]
    return """
      import os, socket, ssl, sys, threading
      \(TLSServer.lockedPrint)
      context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
      context.load_cert_chain(sys.argv[1], sys.argv[2])
      \(setUp.joined(separator: "\n"))
      listener = socket.create_server(("127.0.0.1", 0))
      reporting = \(reportingHowClientsClose ? "True" : "False")
      connections = 0
      def control():
          while sys.stdin.readline():
              print("connections", connections)
          os._exit(0)
      threading.Thread(target=control, daemon=True).start()
      print("port", listener.getsockname()[1])
      while True:
          raw, _ = listener.accept()
          connections += 1
          raw.settimeout(10)
          try:
              with context.wrap_socket(raw, server_side=True, suppress_ragged_eofs=not reporting) as tls:
                  head = b""
                  while b"\\r\\n\\r\\n" not in head:
                      chunk = tls.recv(4096)
                      if not chunk:
                          break
                      head += chunk
      \(answer.map { String(repeating: " ", count: 12) + $0 }.joined(separator: "\n"))
                  tls.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n%s" % (len(body), body))
                  if reporting:
                      try:
                          print("closed with close_notify" if tls.recv(1) == b"" else "closed: more bytes")
                      except ssl.SSLEOFError:
                          print("closed without close_notify")
                      except OSError as error:
                          print("closed:", error)
          except (OSError, ValueError) as error:
              print("failed", error)
              raw.close()
      """
  }

  /// `text` as a Python string literal.
  static func pythonString(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
  }

  /// Starts the server with `certificate`, running `script` (a program that takes the
  /// certificate and key paths, prints "port N" once it listens and "connections N" for each
  /// line of its input, and exits when its input closes); returns once it listens (at most 30 s).
  ///
  /// Blocks the calling thread: call it through `offThePool`.
  init(serving certificate: TestCertificate, script: String = TLSServer.script()) throws {
    let (process, output) = try PythonProcess.start(
      script: script, arguments: [certificate.certificate.path, certificate.key.path])
    self.process = process
    self.output = output
    // Under ThreadSanitizer on a loaded machine, python3 has been seen to take seconds to start.
    guard let line = output.first(from: 0, withPrefix: "port ", timeout: .seconds(30)),
      let port = Int(line.dropFirst("port ".count))
    else {
      self.port = 0
      stop()
      throw TLSFixtureError(description: "the TLS server did not start: \(output.all)")
    }
    self.port = port
  }

  /// Returns `https://HOST:PORT/`.
  func baseURL(host: String = "127.0.0.1") -> URL {
    URL(string: "https://\(host):\(port)/")!
  }

  /// Returns how many connections the server has accepted, asking it (at most 10 s).
  ///
  /// Exact once the client has seen the outcome of its connections: the server counts a
  /// connection before the TLS handshake, which the client cannot finish or fail without it.
  /// Blocks the calling thread: call it through `offThePool`.
  func connections() throws -> Int {
    let start = output.count
    // A server that died makes this throw `EPIPE` (`ChildProcess.write` never raises SIGPIPE).
    try process.write(Data("count\n".utf8))
    guard let line = output.first(from: start, withPrefix: "connections ", timeout: .seconds(10)),
      let count = Int(line.dropFirst("connections ".count))
    else { throw TLSFixtureError(description: "the TLS server did not answer: \(output.all)") }
    return count
  }

  /// What the server printed, for failure messages.
  var log: [String] { output.all }

  /// Stops the server: closes its input, sends it SIGTERM, and waits (at most 10 s, then SIGKILL)
  /// for it to exit.
  func stop() {
    process.closeStandardInput()
    process.terminate(grace: .seconds(10))
  }
}

/// Makes a certificate with `makeCertificate`, starts a `TLSServer` with it, runs `body`, and
/// stops the server and removes the certificate whatever happens.
func withTLSServer<T>(
  commonName: String = "localhost", alternativeNames: String = "DNS:localhost,IP:127.0.0.1",
  _ body: (TLSServer) async throws -> T
) async throws -> T {
  _ = loopbackBypassesProxy
  let directory = FileManager.default.temporaryDirectory
    .appendingPathComponent("PromiseHTTPTests-TLS-\(UUID().uuidString)")
  try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  defer { try? FileManager.default.removeItem(at: directory) }
  let started: Result<TLSServer, any Error> = await offThePool {
    Result {
      try TLSServer(
        serving: try TestCertificate.make(
          commonName: commonName, alternativeNames: alternativeNames, in: directory))
    }
  }
  let server = try started.get()
  do {
    let result = try await body(server)
    await offThePool { server.stop() }
    return result
  } catch {
    await offThePool { server.stop() }
    throw error
  }
}
