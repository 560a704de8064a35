import Foundation
import LoopbackHTTPServer

/// httpbin (the Python request-echo service) served by gunicorn: a server the project did not
/// write, for `HttpbinTests`.
///
/// One server for the whole test process, and one over TLS, each started by the first test that
/// asks for it: a python3 watcher binds a loopback port, hands the socket to gunicorn
/// (`--bind fd://N`), waits until httpbin answers, prints the port, and stops gunicorn when its
/// standard input closes — which happens when the test process exits, however it exits.
///
/// The server over TLS has a certificate for 127.0.0.1 signed by an authority the tests make
/// (`TLSFixtures.chain`); gunicorn reads the files for every connection, so they stay until
/// the watcher has stopped it, and the watcher removes them then.
final class HttpbinServer: Sendable {
  /// Whether `python3` can import `httpbin` and `gunicorn` (`.ci/run` installs both).
  ///
  /// Asked once, on a thread of its own: a suite's condition runs on Swift's cooperative pool,
  /// and blocking it while python3 starts held up every test running in parallel (under
  /// ThreadSanitizer, unrelated tests waited 10–20 s and timing tests failed).
  static func isAvailable() async -> Bool {
    guard ProcessInfo.processInfo.environment["PROMISEHTTP_HTTPBIN"] == "1" else { return false }
    return await offThePool { available }
  }

  private static let available: Bool = {
    guard let python = TLSTools.python else { return false }
    let outcome = try? ChildProcess.run(python, ["-c", "import httpbin, gunicorn"], timeout: .seconds(60))
    return outcome?.isSuccess == true
  }()

  /// The server of this test process, started on first use; the error if it could not start.
  static let shared: Result<HttpbinServer, any Error> = Result { try HttpbinServer(overTLS: false) }

  /// The server over TLS of this test process, started on first use; the error if it could not
  /// start.
  static let overTLS: Result<HttpbinServer, any Error> = Result { try HttpbinServer(overTLS: true) }

  /// The port it listens on, on 127.0.0.1.
  let port: Int
  /// Over TLS, the PEM of the authority that signed the server's certificate; `nil` in plain HTTP.
  let authority: Data?
  // Kept so that its standard input stays open until the test process exits.
  private let process: ChildProcess

  // Over TLS, its arguments are the certificate, its key, the authority and the directory
  // that holds them.
  private static let script = """
    import os, shutil, socket, ssl, subprocess, sys, time, urllib.request
    from gunicorn.config import KNOWN_SETTINGS
    tls = sys.argv[1:]
    # A gunicorn that has a control socket opens it at one path per user: the two servers would
    # take it from each other.
    control = ["--no-control-socket"] if any(s.name == "control_socket_disable" for s in KNOWN_SETTINGS) else []
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    os.set_inheritable(listener.fileno(), True)
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--bind", "fd://%d" % listener.fileno(),
         "--workers", "2", "--worker-class", "gthread", "--threads", "32",
         "--log-level", "warning"] + control + (["--certfile", tls[0], "--keyfile", tls[1]] if tls else [])
        + ["httpbin:app"],
        pass_fds=(listener.fileno(),))
    context = ssl.create_default_context(cafile=tls[2]) if tls else None
    deadline = time.time() + 60
    while True:
        try:
            url = "%s://127.0.0.1:%d/get" % ("https" if tls else "http", port)
            urllib.request.urlopen(url, timeout=2, context=context).read()
            break
        except Exception as error:
            if time.time() > deadline or server.poll() is not None:
                print("failed", error, flush=True)
                server.kill()
                if tls:
                    shutil.rmtree(tls[3], ignore_errors=True)
                sys.exit(1)
            time.sleep(0.1)
    print("port", port, flush=True)
    sys.stdin.read()
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
    if tls:
        shutil.rmtree(tls[3], ignore_errors=True)
    """

  private init(overTLS: Bool) throws {
    var arguments: [String] = []
    var authority: Data?
    // Removed by the watcher once it runs.
    var directory: URL?
    let started: (ChildProcess, Lines)
    do {
      if overTLS {
        let made = FileManager.default.temporaryDirectory
          .appendingPathComponent("PromiseHTTPTests-httpbin-\(UUID().uuidString)")
        directory = made
        try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
        let (signer, leaf) = try TLSFixtures.chain(in: made)
        authority = try Data(contentsOf: signer.certificate)
        arguments = [leaf.certificate.path, leaf.key.path, signer.certificate.path, made.path]
      }
      // gunicorn's own log (its workers hold standard error until the test process exits) goes
      // to the test log, as with python3 run by hand, not through the pipe the port comes on.
      started = try PythonProcess.start(script: Self.script, arguments: arguments, keepingStandardError: true)
    } catch {
      if let directory { try? FileManager.default.removeItem(at: directory) }
      throw error
    }
    let (process, output) = started
    self.process = process
    self.authority = authority
    // Under ThreadSanitizer on a loaded machine, python3 and gunicorn take seconds to start.
    guard let line = output.first(from: 0, withPrefix: "port ", timeout: .seconds(60)),
      let port = Int(line.dropFirst("port ".count))
    else {
      process.closeStandardInput()
      throw TLSFixtureError(description: "httpbin under gunicorn did not start: \(output.all)")
    }
    self.port = port
  }

  /// `http://127.0.0.1:PORT/`, or `https://…` over TLS.
  var baseURL: URL { URL(string: "\(authority == nil ? "http" : "https")://127.0.0.1:\(port)/")! }
}
