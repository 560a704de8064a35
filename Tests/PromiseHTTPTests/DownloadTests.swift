import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

/// `size` deterministic pseudo-random bytes (xorshift), different for each `seed`.
///
/// Each step's 64-bit state gives eight bytes, little-endian. The loop runs on words, with no
/// generic call per byte: in a debug build under ThreadSanitizer such calls made this take
/// 0.3 s per 3 MiB (now 0.08 s) on a cooperative-pool thread, where the tests call it.
func downloadContent(_ size: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
  var state = seed | 1
  var words = [UInt64](repeating: 0, count: (size + 7) / 8)
  words.withUnsafeMutableBufferPointer { words in
    var index = 0
    while index < words.count {
      state ^= state &<< 13
      state ^= state &>> 7
      state ^= state &<< 17
      words[index] = state.littleEndian
      index += 1
    }
  }
  return words.withUnsafeBytes { Array($0.prefix(size)) }
}

/// The response a server that honours `Range` and `If-Range` gives `request` for `content`,
/// whose version is `etag` (or `lastModified`), and the offset its body starts at.
func rangeResponse(
  _ content: [UInt8], etag: String?, lastModified: String? = nil, for request: RecordedRequest
) -> (response: ServerResponse, start: Int) {
  var headers: [(String, String)] = [
    ("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes"),
  ]
  if let etag { headers.append(("ETag", etag)) }
  if let lastModified { headers.append(("Last-Modified", lastModified)) }
  let validator = etag ?? lastModified
  if let range = request.header("Range"), range.hasPrefix("bytes="), range.hasSuffix("-"),
    let start = Int(range.dropFirst("bytes=".count).dropLast()), start < content.count,
    request.header("If-Range") == nil || request.header("If-Range") == validator
  {
    headers.append(("Content-Range", "bytes \(start)-\(content.count - 1)/\(content.count)"))
    return (ServerResponse(status: 206, headers: headers, body: Array(content[start...])), start)
  }
  return (ServerResponse(status: 200, headers: headers, body: content), 0)
}

/// The size and checksum of some bytes: compared instead of the bytes, so that a failure
/// prints two short lines, not megabytes.
///
/// The checksum is the loopback server's `ByteChecksum`, which reads eight bytes at a time:
/// a byte-at-a-time hash (FNV-1a, before) took 0.14 s per 3 MiB in a debug build under
/// ThreadSanitizer, and the download suites compare dozens of such files on cooperative-pool
/// threads (ByteChecksum: 0.013 s).
struct Fingerprint: Equatable, CustomStringConvertible {
  let checksum: ByteChecksum

  init(_ bytes: some Collection<UInt8>) {
    checksum = ByteChecksum(bytes)
  }

  init(_ checksum: ByteChecksum) {
    self.checksum = checksum
  }

  var description: String { checksum.description }
}

/// A fresh directory for one test's files; `remove()` deletes it.
struct DownloadDirectory {
  let url: URL

  init() throws {
    url = FileManager.default.temporaryDirectory.appendingPathComponent(
      "promisehttp-download-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }

  /// The URL of `name` in the directory.
  func file(_ name: String = "download.bin") -> URL { url.appendingPathComponent(name) }

  /// The names in the directory, hidden ones included, sorted.
  var names: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
  }

  /// The bytes of `name`, or `nil` when there is no such file.
  func contents(_ name: String = "download.bin") -> [UInt8]? {
    FileManager.default.contents(atPath: file(name).path).map(Array.init)
  }

  /// The size and checksum of `name`, or `nil` when there is no such file.
  func fingerprint(_ name: String = "download.bin") -> Fingerprint? {
    (try? ByteChecksum(contentsOfFile: file(name).path)).map(Fingerprint.init)
  }

  func remove() {
    try? FileManager.default.removeItem(at: url)
  }
}

/// Runs `body` with a fresh directory, removed afterwards.
func withDownloadDirectory<T>(_ body: (DownloadDirectory) async throws -> T) async throws -> T {
  let directory = try DownloadDirectory()
  defer { directory.remove() }
  return try await body(directory)
}

/// Returns the `TransferError` of a rejected outcome, recording a test issue otherwise.
func transferError<T>(
  _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
) -> TransferError? {
  switch result {
  case .failure(let error as TransferError):
    return error
  default:
    Issue.record("expected a TransferError, got \(result)", sourceLocation: sourceLocation)
    return nil
  }
}

/// Downloading to a file: the file appears whole, or not at all.
@Suite("HTTPClient+Download", .timeLimit(.minutes(1)))
struct DownloadTests {
  static let content = downloadContent(2 << 20)

  @Test func theBodyArrivesWholeInTheFileAndTheTemporaryFileIsGone() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { request in
          .respond(rangeResponse(Self.content, etag: "\"v1\"", for: request).0)
        }
      }) { server in
        let client = server.client()
        let download = try await client.download("file", to: directory.file()).value
        #expect(download.byteCount == Int64(Self.content.count))
        #expect(download.fileURL == directory.file().standardizedFileURL)
        #expect(download.response.statusCode == 200)
        #expect(download.response.body.isEmpty)
        #expect(download.response.headers["ETag"] == "\"v1\"")
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(directory.names == ["download.bin"])
        let request = try #require(server.requests.first)
        #expect(request.header("Range") == nil)
        #expect(request.header("Accept-Encoding") == "identity")
      }
    }
  }

  @Test func aBodyLargerThanMaximumResponseSizeIsDownloaded() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        let client = server.client(maximumResponseSize: 1024)
        let download = try await client.download("file", to: directory.file()).value
        #expect(download.byteCount == Int64(Self.content.count))
        #expect(directory.fingerprint() == Fingerprint(Self.content))
      }
    }
  }

  @Test func anExistingDestinationIsRefusedBeforeAnythingIsSent() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        try Data("old".utf8).write(to: directory.file())
        let (result, _) = await outcome(of: server.client().download("file", to: directory.file()))
        #expect(transferError(result) == .destinationExists(directory.file().standardizedFileURL))
        #expect(server.requests.isEmpty)
        #expect(directory.fingerprint() == Fingerprint(Array("old".utf8)))
        #expect(directory.names == ["download.bin"])
        #expect("\(transferError(result)!)".contains("replacesExistingFile"))
      }
    }
  }

  @Test func replacesExistingFileReplacesTheDestination() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        try Data("old".utf8).write(to: directory.file())
        let options = DownloadOptions(replacesExistingFile: true)
        _ = try await server.client().download("file", to: directory.file(), options: options).value
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(directory.names == ["download.bin"])
      }
    }
  }

  @Test func aDestinationThatAppearsDuringTheDownloadIsNotReplaced() async throws {
    try await withDownloadDirectory { directory in
      let destination = directory.file()
      try await withServer({ router in
        router.on("GET", "/file") { _ in
          // Another program creates the file while the body is on its way.
          _ = FileManager.default.createFile(atPath: destination.path, contents: Data("theirs".utf8))
          return .respond(ServerResponse(body: Self.content))
        }
      }) { server in
        let (result, _) = await outcome(of: server.client().download("file", to: destination))
        #expect(transferError(result) == .destinationExists(destination.standardizedFileURL))
        #expect(directory.fingerprint() == Fingerprint(Array("theirs".utf8)))
        #expect(directory.names == ["download.bin"])
      }
    }
  }

  @Test func aDirectoryThatCannotBeWrittenIsRefusedBeforeAnythingIsSent() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(ServerResponse(body: Self.content)) }
      }) { server in
        // root ignores permission bits: then a directory of sysfs, which nobody may write.
        let readOnly: URL
        if geteuid() == 0 {
          readOnly = URL(fileURLWithPath: "/sys", isDirectory: true)
        } else {
          readOnly = directory.url.appendingPathComponent("read-only", isDirectory: true)
          try FileManager.default.createDirectory(at: readOnly, withIntermediateDirectories: false)
          chmod(readOnly.path, 0o555)
        }
        defer { chmod(readOnly.path, 0o755) }
        let destination = readOnly.appendingPathComponent("promisehttp-download-test.bin")
        let (result, _) = await outcome(of: server.client().download("file", to: destination))
        let error = transferError(result)
        #expect([.EACCES, .EROFS, .EPERM].contains(error?.posixCode), "\(String(describing: error))")
        #expect("\(String(describing: error))".contains("could not create"))
        #expect(server.requests.isEmpty)
      }
    }
  }

  @Test func aDirectoryDestinationAndARangeHeaderAreRefused() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ _ in }) { server in
        let client = server.client()
        let (toDirectory, _) = await outcome(of: client.download("file", to: directory.url))
        guard case .invalidDestination? = transferError(toDirectory) else {
          Issue.record("got \(String(describing: transferError(toDirectory)))")
          return
        }
        let (ranged, _) = await outcome(
          of: client.download("file", to: directory.file(), headers: ["Range": "bytes=0-9"]))
        guard case .invalidRequest? = httpError(ranged) else {
          Issue.record("got \(String(describing: httpError(ranged)))")
          return
        }
        #expect(server.requests.isEmpty)
        #expect(directory.names.isEmpty)
      }
    }
  }

  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func anUnacceptableStatusRejectsAndLeavesNoFile(_ transport: HTTPClient.Engine) async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(.text("no such file", status: 404)) }
      }) { server in
        let client = server.client(engine: transport)
        let (result, _) = await outcome(of: client.download("file", to: directory.file()))
        #expect(httpError(result)?.statusCode == 404)
        #expect(httpError(result)?.description.contains("no such file") == true)
        #expect(directory.names.isEmpty)
        expectSent(over: transport, server.requests)
      }
    }
  }

  @Test func tooLargeNamesTheLimitAndTheDownload() {
    let error = HTTPError.tooLarge(limit: 4 << 20, url: URL(string: "https://example.com/big"))
    #expect(error.description.contains("maximumResponseSize"))
    #expect(error.description.contains("HTTPClient.download(_:to:)"))
    #expect(error.description.contains("\(4 << 20) bytes"))
  }

  @Test func theContentRangeParserTakesOnlyWellFormedRanges() {
    #expect(DownloadSink.contentRange("bytes 10-19/20")! == (10, 19, 20))
    #expect(DownloadSink.contentRange("bytes 0-0/*")! == (0, 0, nil))
    for bad in [
      "bytes 10-9/20", "bytes 10-19/19", "bytes */20", "items 0-1/2", "bytes 1-2", "", "bytes -1-2/3",
      "bytes +1-2/3", "bytes 1-2/",
    ] {
      #expect(DownloadSink.contentRange(bad) == nil, "\(bad)")
    }
    #expect(DownloadSink.contentRange(nil) == nil)
  }
}
