import Foundation
import LoopbackHTTPServer

/// httpbin (the Python request-echo service) served by gunicorn: a server the project did not
/// write, for `HttpbinTests`.
///
/// One server for the whole test process, started by the first test that asks for it: a python3
/// watcher binds a loopback port, hands the socket to gunicorn (`--bind fd://N`), waits until
/// httpbin answers, prints the port, and stops gunicorn when its standard input closes — which
/// happens when the test process exits, however it exits.
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
  static let shared: Result<HttpbinServer, any Error> = Result { try HttpbinServer() }

  /// The port it listens on, on 127.0.0.1.
  let port: Int
  // Kept so that its standard input stays open until the test process exits.
  private let process: ChildProcess

  private static let script = """
    import os, socket, subprocess, sys, time, urllib.request
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    os.set_inheritable(listener.fileno(), True)
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--bind", "fd://%d" % listener.fileno(),
         "--workers", "2", "--worker-class", "gthread", "--threads", "32",
         "--log-level", "warning", "httpbin:app"],
        pass_fds=(listener.fileno(),))
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/get" % port, timeout=2).read()
            break
        except Exception as error:
            if time.time() > deadline or server.poll() is not None:
                print("failed", error, flush=True)
                server.kill()
                sys.exit(1)
            time.sleep(0.1)
    print("port", port, flush=True)
    sys.stdin.read()
    server.terminate()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
    """

  private init() throws {
    // gunicorn's own log (its workers hold standard error until the test process exits) goes
    // to the test log, as with python3 run by hand, not through the pipe the port comes on.
    let (process, output) = try PythonProcess.start(script: Self.script, keepingStandardError: true)
    self.process = process
    // Under ThreadSanitizer on a loaded machine, python3 and gunicorn take seconds to start.
    guard let line = output.first(from: 0, withPrefix: "port ", timeout: .seconds(60)),
      let port = Int(line.dropFirst("port ".count))
    else {
      process.closeStandardInput()
      throw TLSFixtureError(description: "httpbin under gunicorn did not start: \(output.all)")
    }
    self.port = port
  }

  /// `http://127.0.0.1:PORT/`.
  var baseURL: URL { URL(string: "http://127.0.0.1:\(port)/")! }
}
