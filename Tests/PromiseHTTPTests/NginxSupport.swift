import Foundation
import LoopbackHTTPServer

/// nginx, run as this process's child on two loopback ports (plain HTTP and HTTPS): a server
/// the project did not write, for `NginxTests`.
///
/// One server for the whole test process, started by the first test that asks for it, from
/// the `nginx` on PATH (`.ci/run` installs Debian's). A python3 watcher picks two free ports,
/// writes `nginx.conf` (`daemon off`, one process, files and logs in a temporary directory),
/// starts nginx, waits until it answers, prints the ports, and stops nginx and removes the
/// directory when its standard input closes — when the test process exits, however it exits.
///
/// Its access log has one line per request: nginx's connection number, the request's number
/// on that connection, the status, the method and the request URI. The tests tag their
/// requests with a query of their own (`?t=TAG`) and read their lines with `log(tagged:count:)`:
/// the lines tell which requests shared a connection, as seen by the server.
///
/// Over HTTPS it asks every client for a certificate (`ssl_verify_client optional`), and
/// `/mtls/` answers 200 with the subject of a certificate signed by `authority`, 403 without.
final class NginxServer: Sendable {
  /// The `nginx` executable on PATH (or in /usr/sbin), if there is one.
  static let executable: String? = {
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    return path.split(separator: ":").map { "\($0)/nginx" }.first {
      FileManager.default.isExecutableFile(atPath: $0)
    }
  }()

  /// Whether the suite can run: nginx, python3 and openssl are there.
  static let isAvailable = executable != nil && TLSTools.available

  /// The server of this test process, started on first use; the error if it could not start.
  static let shared: Result<NginxServer, any Error> = Result { try NginxServer() }

  /// The port of plain HTTP, on 127.0.0.1.
  let plainPort: Int
  /// The port of HTTPS, on 127.0.0.1, with a certificate for 127.0.0.1 signed by `authority`.
  let tlsPort: Int
  /// The PEM of the authority that signed the server's certificate.
  let authority: Data
  /// The PEM file of `authority`, for curl's `--cacert`.
  let authorityFile: URL
  /// The server's own certificate for 127.0.0.1 and its key (PEM), signed by `authority`: a
  /// client certificate that nginx accepts, too.
  var leafCertificate: URL { directory.appendingPathComponent("leaf.pem") }
  var leafKey: URL { directory.appendingPathComponent("leaf.key") }
  /// The directory nginx serves (`www`) and logs in; removed by the watcher when it stops.
  let directory: URL
  // Kept so that its standard input stays open until the test process exits.
  private let process: ChildProcess

  /// The size of `big.bin`, random bytes.
  static let bigSize = 24 << 20

  private static let configuration = """
    daemon off;
    master_process off;
    worker_processes 1;
    pid @DIR@/nginx.pid;
    error_log @DIR@/error.log warn;
    events { worker_connections 512; }
    http {
      log_format tagged '$connection $connection_requests $status $request_method $request_uri';
      access_log @DIR@/access.log tagged;
      client_body_temp_path @DIR@/tmp;
      proxy_temp_path @DIR@/tmp;
      fastcgi_temp_path @DIR@/tmp;
      uwsgi_temp_path @DIR@/tmp;
      scgi_temp_path @DIR@/tmp;
      client_max_body_size 0;
      sendfile on;
      types { application/json json; text/plain txt; application/octet-stream bin; }
      gzip on;
      gzip_types application/json;
      gzip_min_length 0;
      keepalive_requests 1000;
      keepalive_timeout 60s;
      server {
        listen 127.0.0.1:@PLAIN@;
        listen 127.0.0.1:@TLS@ ssl;
        ssl_certificate @DIR@/leaf.pem;
        ssl_certificate_key @DIR@/leaf.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_client_certificate @DIR@/ca.pem;
        ssl_verify_client optional;
        root @DIR@/www;
        location /mtls/ {
          if ($ssl_client_verify != SUCCESS) { return 403 "no client certificate: $ssl_client_verify\n"; }
          return 200 "client $ssl_client_s_dn\n";
        }
        location /upload/ { dav_methods PUT; create_full_put_path on; }
        location /short/ { keepalive_timeout 1s; }
        location /close/ { keepalive_timeout 0; }
      }
    }
    """

  // Arguments: nginx, the directory. Tries other ports if nginx cannot listen on the first.
  private static let script = """
    import os, shutil, socket, subprocess, sys, time, urllib.request
    nginx, root = sys.argv[1:3]
    template = open(os.path.join(root, "nginx.conf.in")).read()
    server = None
    for attempt in range(10):
        listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
        ports = [listener.getsockname()[1] for listener in listeners]
        for listener in listeners:
            listener.close()
        with open(os.path.join(root, "nginx.conf"), "w") as conf:
            conf.write(template.replace("@PLAIN@", str(ports[0])).replace("@TLS@", str(ports[1])))
        server = subprocess.Popen([nginx, "-c", os.path.join(root, "nginx.conf"), "-p", root,
            "-e", os.path.join(root, "error.log")], stdout=sys.stderr)
        deadline = time.time() + 30
        answered = False
        while time.time() < deadline and server.poll() is None:
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/small.txt?t=start" % ports[0], timeout=2).read()
                answered = True
                break
            except Exception:
                time.sleep(0.05)
        if answered:
            break
        if server.poll() is None:
            server.kill()
        server.wait()
        server = None
    if server is None:
        try:
            print("failed", open(os.path.join(root, "error.log")).read().replace("\\n", " | "), flush=True)
        except OSError as error:
            print("failed", error, flush=True)
        shutil.rmtree(root, ignore_errors=True)
        sys.exit(1)
    print("ports", ports[0], ports[1], flush=True)
    \(pythonWatcherEnd)
    """

  private init() throws {
    guard let nginx = Self.executable else {
      throw TLSFixtureError(description: "no nginx on PATH (apt-get install nginx)")
    }
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("PromiseHTTPTests-nginx-\(UUID().uuidString)")
    let started: (ChildProcess, Lines)
    do {
      let www = directory.appendingPathComponent("www")
      for folder in ["www/upload", "www/short", "www/close", "tmp"] {
        try FileManager.default.createDirectory(
          at: directory.appendingPathComponent(folder), withIntermediateDirectories: true)
      }
      let (signer, leaf) = try TLSFixtures.chain(in: directory)
      precondition(
        leaf.certificate.lastPathComponent == "leaf.pem" && leaf.key.lastPathComponent == "leaf.key")
      authority = try Data(contentsOf: signer.certificate)
      authorityFile = signer.certificate
      try Data(Self.smallBody.utf8).write(to: www.appendingPathComponent("small.txt"))
      for folder in ["short", "close"] {
        try Data(Self.smallBody.utf8).write(to: www.appendingPathComponent("\(folder)/small.txt"))
      }
      try Self.json.write(to: www.appendingPathComponent("data.json"))
      try Self.big.write(to: www.appendingPathComponent("big.bin"))
      try Data(Self.configuration.replacingOccurrences(of: "@DIR@", with: directory.path).utf8)
        .write(to: directory.appendingPathComponent("nginx.conf.in"))
      started = try PythonProcess.start(
        script: Self.script, arguments: [nginx, directory.path], keepingStandardError: true)
    } catch {
      try? FileManager.default.removeItem(at: directory)
      throw error
    }
    let (process, output) = started
    self.process = process
    self.directory = directory
    guard let line = output.first(from: 0, withPrefix: "ports ", timeout: .seconds(60)) else {
      process.closeStandardInput()
      throw TLSFixtureError(description: "nginx did not start: \(output.all)")
    }
    let ports = line.split(separator: " ").dropFirst().compactMap { Int($0) }
    guard ports.count == 2 else {
      process.closeStandardInput()
      throw TLSFixtureError(description: "nginx's watcher printed \(line)")
    }
    plainPort = ports[0]
    tlsPort = ports[1]
  }

  /// The body of `small.txt` (and of `short/small.txt`, `close/small.txt`).
  static let smallBody = "hello from nginx\n"

  /// The bytes of `data.json`: about 190 KB of JSON, which nginx sends gzipped and chunked.
  static let json: Data = {
    let items = (0..<2_000).map {
      #"{"id":\#($0),"name":"item \#($0)","tags":["a","b","c"],"ratio":\#(Double($0) / 7)}"#
    }
    return Data(("[" + items.joined(separator: ",") + "]\n").utf8)
  }()

  /// The bytes of `big.bin`: `bigSize` bytes from a fixed-seed generator.
  static let big: Data = {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    var data = Data(count: bigSize)
    data.withUnsafeMutableBytes { raw in
      let words = raw.bindMemory(to: UInt64.self)
      for index in words.indices {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        words[index] = state
      }
    }
    return data
  }()

  /// `http://127.0.0.1:PORT/`, or the HTTPS port's `https://…`.
  func baseURL(overTLS: Bool) -> URL {
    URL(string: overTLS ? "https://127.0.0.1:\(tlsPort)/" : "http://127.0.0.1:\(plainPort)/")!
  }

  /// One request as nginx logged it.
  struct LogLine: Sendable, Equatable, CustomStringConvertible {
    /// nginx's number of the connection that carried it.
    let connection: Int
    /// Its number among that connection's requests, from 1.
    let requestOnConnection: Int
    let status: Int
    let method: String
    let uri: String

    var description: String { "#\(connection).\(requestOnConnection) \(status) \(method) \(uri)" }
  }

  /// The log lines of requests whose query has `t=TAG`, in the order nginx logged them, once
  /// there are `count` of them (nginx logs a request after its response has gone out, so the
  /// last line may come after the client has the response), waiting at most 10 s.
  func log(tagged tag: String, count: Int) async -> [LogLine] {
    let file = directory.appendingPathComponent("access.log")
    return await offThePool {
      let deadline = ContinuousClock.now + .seconds(10)
      var lines: [LogLine] = []
      repeat {
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        lines = text.split(separator: "\n").compactMap { line in
          let fields = line.split(separator: " ")
          guard fields.count == 5, fields[4].contains("t=\(tag)"), let connection = Int(fields[0]),
            let number = Int(fields[1]), let status = Int(fields[2])
          else { return nil }
          return LogLine(
            connection: connection, requestOnConnection: number, status: status, method: String(fields[3]),
            uri: String(fields[4]))
        }
        if lines.count >= count { break }
        usleep(20_000)
      } while ContinuousClock.now < deadline
      return lines
    }
  }
}

/// tinyproxy, a forward proxy we did not write, run as this process's child on a loopback port
/// (`Port`, `Listen 127.0.0.1`, `Allow 127.0.0.1`, every `CONNECT` port allowed), for the
/// proxy cases of `NginxTests`. One for the whole test process, started on first use by a
/// python3 watcher that stops it when the test process exits.
final class TinyproxyServer: Sendable {
  /// The `tinyproxy` executable on PATH (or in /usr/bin, /usr/sbin), if there is one.
  static let executable: String? = {
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/bin:/usr/sbin"
    return path.split(separator: ":").map { "\($0)/tinyproxy" }.first {
      FileManager.default.isExecutableFile(atPath: $0)
    }
  }()

  /// The proxy of this test process, started on first use; the error if it could not start.
  static let shared: Result<TinyproxyServer, any Error> = Result { try TinyproxyServer() }

  /// The port it listens on, on 127.0.0.1.
  let port: Int
  // Kept so that its standard input stays open until the test process exits.
  private let process: ChildProcess

  // Arguments: tinyproxy, a directory for its configuration and log (removed when it stops).
  private static let script = """
    import os, shutil, socket, subprocess, sys, time
    tinyproxy, root = sys.argv[1:3]
    \(pythonStartOnFreePort)
    def command(port):
        with open(os.path.join(root, "tinyproxy.conf"), "w") as conf:
            conf.write("Port %d\\nListen 127.0.0.1\\nTimeout 60\\nMaxClients 64\\nAllow 127.0.0.1\\n"
                "LogLevel Info\\nLogFile \\"%s/tinyproxy.log\\"\\nPidFile \\"%s/tinyproxy.pid\\"\\n" % (port, root, root))
        return [tinyproxy, "-d", "-c", os.path.join(root, "tinyproxy.conf")]
    server, port = start_on_free_port(command, sys.stderr)
    print("port", port, flush=True)
    \(pythonWatcherEnd)
    """

  private init() throws {
    guard let tinyproxy = Self.executable else {
      throw TLSFixtureError(description: "no tinyproxy on PATH (apt-get install tinyproxy)")
    }
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("PromiseHTTPTests-tinyproxy-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let (process, output) = try PythonProcess.start(
      script: Self.script, arguments: [tinyproxy, directory.path], keepingStandardError: true)
    self.process = process
    guard let line = output.first(from: 0, withPrefix: "port ", timeout: .seconds(60)),
      let port = Int(line.dropFirst("port ".count))
    else {
      process.closeStandardInput()
      throw TLSFixtureError(description: "tinyproxy did not start: \(output.all)")
    }
    self.port = port
  }
}

/// A python function for a program that runs a server of ours as its child, in the scratch
/// folder `root`: `start_on_free_port(command, output)` picks a free port on 127.0.0.1, starts
/// `command(port)` (a list of arguments) with its output to `output`, and returns the process
/// and the port once the port takes connections (at most 30 s), trying another port up to 10
/// times; if none works it prints "failed", removes `root` and exits. Needs `shutil`,
/// `socket`, `subprocess`, `sys` and `time`.
let pythonStartOnFreePort = """
  def start_on_free_port(command, output):
      for attempt in range(10):
          listener = socket.create_server(("127.0.0.1", 0))
          port = listener.getsockname()[1]
          listener.close()
          server = subprocess.Popen(command(port), stdout=output, stderr=output)
          deadline = time.time() + 30
          while time.time() < deadline and server.poll() is None:
              try:
                  socket.create_connection(("127.0.0.1", port), timeout=1).close()
                  return server, port
              except OSError:
                  time.sleep(0.05)
          if server.poll() is None:
              server.kill()
          server.wait()
      print("failed", flush=True)
      shutil.rmtree(root, ignore_errors=True)
      sys.exit(1)
  """

/// The end of a python program that runs a server of ours as its child (`server`, in the
/// scratch folder `root`): it waits until its standard input closes (the test process closed it,
/// or died), then stops the server, at most 10 s before it kills it, and removes the folder.
let pythonWatcherEnd = """
  sys.stdin.read()
  server.terminate()
  try:
      server.wait(10)
  except subprocess.TimeoutExpired:
      server.kill()
  shutil.rmtree(root, ignore_errors=True)
  """
