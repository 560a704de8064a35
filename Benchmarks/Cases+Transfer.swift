import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Synchronization

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

#if canImport(Glibc)
  import Glibc
#endif

// Workload 7: large transfers over loopback, file to socket and socket to file. One in-process
// LoopbackServer serves a generated body (`GET /file`, with Content-Length) and consumes uploads
// without keeping them (`PUT /upload`, answering with the byte count and checksum it received).
// Each variant is measured against curl (/usr/bin/curl, a child process) talking to the SAME
// server, with its file in the same directory:
//   download-curl     `curl -o <dir>/download-curl.bin <url>/file`          (baseline)
//   download-promise  `HTTPClient.download("file", to: <dir>/download-promise.bin)`
//   upload-curl       `curl -T <dir>/upload-source.bin <url>/upload` (a PUT) (baseline)
//   upload-promise    `HTTPClient.upload(.file(<dir>/upload-source.bin), to: "upload", method: .put)`
// and, to tell FoundationNetworking's share from the client's, the same with bare `URLSession`:
//   download-urlsession  a data task whose delegate `pwrite`s each chunk to the file
//   upload-urlsession    `uploadTask(with:fromFile:)` (what `HTTPBody.file` uses underneath)
// A sample is one transfer of the whole body (1 GiB; 8 MiB under --smoke), timed from the call
// (or process launch) to the file or response being there, including connection setup. Checked
// untimed afterwards: the downloaded file's size and ByteChecksum, or the count, checksum and
// completeness the server recorded for the upload; a mismatch fails the case. The files live in
// a directory under the system's temporary directory and are removed after each sample and at
// the end of the run (see `TransferScratch`).
//
// Memory: the peak RSS growth of the Benchmarks process during a sample (VmHWM after a reset,
// minus VmRSS before). For the curl variants that is the in-process server alone (curl's own
// memory is another process); for the promise variants it is the client plus the server. In a
// full run a sample growing more than 32 MiB fails the case (the goal of issue 24).

/// The body the server generates and the upload sends.
private let transferSeed: UInt64 = 24

extension Plan {
  func transferCases() -> [BenchCase] {
    var workload = workload(
      "transfer", "1 file over loopback: download to a file, upload from a file, against curl",
      unit: "MiB", units: (full: 1_024, smoke: 8), samples: 3, measuresPeakMemory: true)
    workload.baselineVariant = "curl"
    workload.bytesPerUnit = 1 << 20
    workload.memoryLimitBytes = smoke ? nil : 32 << 20
    workload.memoryLimitedVariants = ["download-promise", "upload-promise"]
    let fixture = TransferFixture(length: Int64(workload.units) << 20)
    // Every case's value is the number of bytes it moved.
    let expected = workload.units << 20

    /// A download case: starts the fixture and removes `<variant>.bin` from its directory
    /// (untimed); times the body `prepare` returns for the server and that destination; then
    /// checks the file's size and checksum and removes it (untimed).
    func downloadCase(
      _ variant: String, _ prepare: @escaping (TransferFixture.Started, URL) -> () throws -> Int
    ) -> BenchCase {
      BenchCase(workload: workload, variant: variant, baseline: "download-curl", expected: expected) {
        let started = try fixture.started()
        let destination = started.directory.appendingPathComponent("\(variant).bin")
        try? FileManager.default.removeItem(at: destination)
        return TimedRun(
          body: prepare(started, destination), verify: { try fixture.verifyDownload(at: destination) })
      }
    }

    /// An upload case: starts the fixture and writes the source file once (untimed); times the
    /// body `prepare` returns for the server and that file, which checks the server's receipt.
    func uploadCase(
      _ variant: String, _ prepare: @escaping (TransferFixture.Started, URL) -> () throws -> Int
    ) -> BenchCase {
      BenchCase(workload: workload, variant: variant, baseline: "upload-curl", expected: expected) {
        let started = try fixture.started()
        let source = try fixture.uploadSource()
        return TimedRun(body: prepare(started, source))
      }
    }

    return [
      downloadCase("download-curl") { started, destination in
        {
          let result = try runCurl(["-o", destination.path, started.fileURL.absoluteString])
          guard result.status == 0 else {
            throw BenchmarkFailure("curl -o exited with \(result.status): \(result.standardError)")
          }
          return try fileSize(destination)
        }
      },
      downloadCase("download-promise") { started, destination in
        {
          let download = try started.client.download("file", to: destination).wait(
            timeout: waitLimitSeconds)
          return Int(download.byteCount)
        }
      },
      downloadCase("download-urlsession") { started, destination in
        { try RawTransfers.download(started.fileURL, to: destination) }
      },
      uploadCase("upload-curl") { started, source in
        {
          let result = try runCurl(["-T", source.path, started.uploadURL.absoluteString])
          guard result.status == 0 else {
            throw BenchmarkFailure("curl -T exited with \(result.status): \(result.standardError)")
          }
          return try fixture.checkUploadReceipt(result.standardOutput)
        }
      },
      uploadCase("upload-promise") { started, source in
        {
          let response = try started.client.upload(.file(source), to: "upload", method: .put)
            .wait(timeout: waitLimitSeconds)
          return try fixture.checkUploadReceipt(response.text)
        }
      },
      uploadCase("upload-urlsession") { started, source in
        { try fixture.checkUploadReceipt(try RawTransfers.upload(source, to: started.uploadURL)) }
      },
    ]
  }
}

/// The transfers written with bare `URLSession`, as a user of FoundationNetworking would.
private enum RawTransfers {
  /// One session for both, delegate-less; a download task gets its own delegate.
  static let session = URLSession(configuration: .ephemeral)

  /// Downloads `url` to `destination` with a data task whose delegate writes each chunk at its
  /// offset; returns the bytes written.
  static func download(_ url: URL, to destination: URL) throws -> Int {
    let descriptor = open(destination.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else { throw BenchmarkFailure("cannot create \(destination.path): errno \(errno)") }
    defer { close(descriptor) }
    let delegate = FileWritingDelegate(descriptor: descriptor)
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: queue)
    defer { session.finishTasksAndInvalidate() }
    session.dataTask(with: url).resume()
    try waitOrFail(delegate.done, "the URLSession download")
    return try delegate.outcome.withLock { $0 }.get()
  }

  /// PUTs the file at `source` to `url` with `uploadTask(with:fromFile:)`; returns the answer.
  static func upload(_ source: URL, to url: URL) throws -> String {
    var request = URLRequest(url: url)
    request.httpMethod = "PUT"
    let done = DispatchSemaphore(value: 0)
    let outcome = Mutex<Result<String, BenchmarkFailure>>(.failure(BenchmarkFailure("no answer")))
    session.uploadTask(with: request, fromFile: source) { data, response, error in
      let result: Result<String, BenchmarkFailure>
      if let error {
        result = .failure(BenchmarkFailure("the URLSession upload failed: \(error)"))
      } else if let http = response as? HTTPURLResponse, http.statusCode == 200, let data {
        result = .success(String(decoding: data, as: UTF8.self))
      } else {
        result = .failure(BenchmarkFailure("the URLSession upload got \(String(describing: response))"))
      }
      outcome.withLock { $0 = result }
      done.signal()
    }.resume()
    try waitOrFail(done, "the URLSession upload")
    return try outcome.withLock { $0 }.get()
  }
}

/// Writes a data task's body to a file descriptor as it arrives (on the session's serial
/// delegate queue) and signals when the task completes.
private final class FileWritingDelegate: NSObject, URLSessionDataDelegate, Sendable {
  let descriptor: Int32
  let done = DispatchSemaphore(value: 0)
  /// The bytes written, or why the download failed.
  let outcome = Mutex<Result<Int, BenchmarkFailure>>(.success(0))

  init(descriptor: Int32) { self.descriptor = descriptor }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    outcome.withLock { outcome in
      guard case .success(let offset) = outcome else { return }
      let written = data.withUnsafeBytes { bytes in
        pwrite(descriptor, bytes.baseAddress, bytes.count, off_t(offset))
      }
      outcome =
        written == data.count
        ? .success(offset + data.count)
        : .failure(BenchmarkFailure("pwrite wrote \(written) of \(data.count) bytes"))
    }
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    if let error {
      outcome.withLock { $0 = .failure(BenchmarkFailure("the URLSession download failed: \(error)")) }
    }
    done.signal()
  }
}

/// The server, client, body and files of the transfer workload, made on first use.
///
/// Used only from the benchmark's main thread (cases are prepared and run there).
private final class TransferFixture {
  struct Started {
    let server: LoopbackServer
    let client: HTTPClient
    let directory: URL
    var fileURL: URL { server.baseURL.appendingPathComponent("file") }
    var uploadURL: URL { server.baseURL.appendingPathComponent("upload") }
  }

  let body: GeneratedBody
  private var state: Started?
  private var source: URL?
  private var expectedChecksum: ByteChecksum?

  init(length: Int64) {
    body = GeneratedBody(length: length, seed: transferSeed)
  }

  /// Starts the server and the client, and makes the directory, once.
  func started() throws -> Started {
    if let state { return state }
    // libcurl (ours and the curl command's) would send loopback requests to an `http_proxy`.
    setenv("no_proxy", "127.0.0.1,127.0.0.2,localhost", 1)
    let body = body
    let router = Router()
    router.on("GET", "/file") { _ in .stream(StreamedResponse(body: body)) }
    router.on("PUT", "/upload", body: { _ in .consume() }) { request in
      guard let consumed = request.consumedBody else { return .respond(.text("no body", status: 400)) }
      return .respond(.text("\(consumed.byteCount) \(consumed.checksum.value) \(consumed.isComplete)"))
    }
    let server = try LoopbackServer(router: router)
    // An idle timeout, not a bound on the transfer (see `HTTPClient.download`); a bound on a
    // busy machine's upload, which has no idle timeout of its own here.
    let client = HTTPClient(
      baseURL: server.baseURL,
      configuration: .init(callbackQueue: callbackQueue, timeout: .seconds(waitLimitSeconds)))
    let directory = try TransferScratch.makeDirectory()
    let started = Started(server: server, client: client, directory: directory)
    state = started
    return started
  }

  /// Writes the body to the upload's source file once; returns it.
  func uploadSource() throws -> URL {
    if let source { return source }
    let url = try started().directory.appendingPathComponent("upload-source.bin")
    do {
      try body.write(toFile: url.path)
    } catch {
      throw BenchmarkFailure("cannot write \(url.path): \(error)")
    }
    source = url
    return url
  }

  /// The body's checksum, computed once.
  var checksum: ByteChecksum {
    if let expectedChecksum { return expectedChecksum }
    let computed = body.checksum
    expectedChecksum = computed
    return computed
  }

  /// Checks that the file at `url` is the body, then removes it.
  func verifyDownload(at url: URL) throws {
    defer { try? FileManager.default.removeItem(at: url) }
    let size = try fileSize(url)
    guard Int64(size) == body.length else {
      throw BenchmarkFailure("\(url.lastPathComponent) has \(size) bytes, expected \(body.length)")
    }
    let actual: ByteChecksum
    do {
      actual = try ByteChecksum(contentsOfFile: url.path)
    } catch {
      throw BenchmarkFailure("cannot read \(url.path): \(error)")
    }
    guard actual == checksum else {
      throw BenchmarkFailure("\(url.lastPathComponent) differs from the body: \(actual) ≠ \(checksum)")
    }
  }

  /// Checks the server's answer to an upload ("<count> <checksum> <complete>"); returns the count.
  func checkUploadReceipt(_ receipt: String) throws -> Int {
    let expected = "\(body.length) \(checksum.value) true"
    let received = receipt.trimmingCharacters(in: .whitespacesAndNewlines)
    guard received == expected else {
      throw BenchmarkFailure("the server received '\(received)', expected '\(expected)'")
    }
    return Int(body.length)
  }
}

/// The directories of the transfer files: one per run, under the system's temporary directory
/// (on this machine /tmp is on the root file system, a disk, not tmpfs), removed at the end.
enum TransferScratch {
  private static let made = Mutex<[URL]>([])

  /// Makes a new, empty directory for this run's files.
  static func makeDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory
      .appendingPathComponent("promises-benchmarks-\(getpid())-\(UUID().uuidString.prefix(8))")
    do {
      try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    } catch {
      throw BenchmarkFailure("cannot create \(url.path): \(error)")
    }
    made.withLock { $0.append(url) }
    return url
  }

  /// Removes every directory made by `makeDirectory()`, with its files.
  static func removeAll() {
    let urls = made.withLock { urls in
      defer { urls = [] }
      return urls
    }
    for url in urls { try? FileManager.default.removeItem(at: url) }
  }
}

/// The size of the file at `url`.
func fileSize(_ url: URL) throws -> Int {
  var info = stat()
  guard stat(url.path, &info) == 0 else {
    throw BenchmarkFailure("cannot stat \(url.path): errno \(errno)")
  }
  return Int(info.st_size)
}

/// What a curl run printed and how it ended.
struct CurlResult {
  let status: Int32
  let standardOutput: String
  let standardError: String
}

/// Runs /usr/bin/curl quietly (errors shown) with `arguments`, without any proxy, and waits.
///
/// The hour's limit only keeps a stuck curl from hanging the run; no transfer comes near it.
func runCurl(_ arguments: [String]) throws -> CurlResult {
  let outcome: ChildProcess.Outcome
  do {
    outcome = try ChildProcess.run(
      "/usr/bin/curl", ["--silent", "--show-error", "--fail", "--noproxy", "*"] + arguments,
      timeout: .seconds(3600))
  } catch {
    throw BenchmarkFailure("cannot run /usr/bin/curl: \(error)")
  }
  guard case .exited(let status) = outcome.termination, !outcome.timedOut else {
    throw BenchmarkFailure("/usr/bin/curl \(outcome.summary): \(outcome.standardErrorText)")
  }
  return CurlResult(
    status: status, standardOutput: outcome.standardOutputText, standardError: outcome.standardErrorText)
}
