import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A file outside the download's directory, which a link planted beside the destination points
/// at; its bytes must come through every download unchanged.
private struct OutsideFile {
  static let precious = Array("precious bytes that are not the download's".utf8)
  let directory: DownloadDirectory

  init() throws {
    directory = try DownloadDirectory()
    #expect(FileManager.default.createFile(atPath: url.path, contents: Data(Self.precious)))
  }

  var url: URL { directory.file("outside.txt") }
  var isUnchanged: Bool { directory.contents("outside.txt") == Self.precious }
  func remove() { directory.remove() }
}

/// The type of the file at `url` itself (a link is not followed).
private func fileType(_ url: URL) -> mode_t? {
  var status = stat()
  return lstat(url.path, &status) == 0 ? status.st_mode & S_IFMT : nil
}

/// A download never writes through a link planted at the names of its own files beside the
/// destination (`.<name>.promisehttp-download` and its `.resume` record): CWE-59.
@Suite("Download links", .timeLimit(.minutes(1)))
struct DownloadLinkTests {
  static let content = downloadContent(1 << 20)
  static let temporaryName = ".download.bin.promisehttp-download"

  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func aSymlinkAtTheTemporaryNameIsNotFollowedWhenTheServerRefuses(
    _ transport: HTTPClient.Engine
  ) async throws {
    let outside = try OutsideFile()
    defer { outside.remove() }
    try await withDownloadDirectory { directory in
      #expect(symlink(outside.url.path, directory.file(Self.temporaryName).path) == 0)
      try await withServer({ router in
        router.on("GET", "/file") { _ in .respond(.text("no such file", status: 404)) }
      }) { server in
        let client = server.client(engine: transport)
        let (result, _) = await outcome(of: client.download("file", to: directory.file()))
        #expect(httpError(result)?.statusCode == 404)
        #expect(outside.isUnchanged)
        #expect(directory.names.isEmpty)
      }
    }
  }

  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func aSymlinkAtTheTemporaryNameIsNotFollowedWhenTheDownloadSucceeds(
    _ transport: HTTPClient.Engine
  ) async throws {
    let outside = try OutsideFile()
    defer { outside.remove() }
    try await withDownloadDirectory { directory in
      #expect(symlink(outside.url.path, directory.file(Self.temporaryName).path) == 0)
      try await withServer({ router in
        router.on("GET", "/file") { request in
          .respond(rangeResponse(Self.content, etag: "\"v1\"", for: request).0)
        }
      }) { server in
        let client = server.client(engine: transport)
        _ = try await client.download("file", to: directory.file()).value
        #expect(outside.isUnchanged)
        #expect(fileType(directory.file()) == S_IFREG, "the destination is a file, not a link")
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(directory.names == ["download.bin"])
      }
    }
  }

  /// Keeps a partial file and its record for `/file` (cut mid-body), then replaces the partial
  /// file with a link made by `plant`, downloads again, and checks that nothing went through it.
  func resumeThroughAPlantedLink(_ plant: (_ target: String, _ name: String) -> Int32) async throws {
    let outside = try OutsideFile()
    defer { outside.remove() }
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        let calls = Counter()
        router.on("GET", "/file") { request in
          let response = rangeResponse(Self.content, etag: "\"v1\"", for: request).0
          return calls.next() == 1 ? .resetMidBody(response, afterBytes: 300_000) : .respond(response)
        }
      }) { server in
        let client = server.client()
        let keep = DownloadOptions(keepsPartialFileOnFailure: true)
        _ = await outcome(of: client.download("file", to: directory.file(), options: keep))
        #expect(directory.names == [Self.temporaryName, Self.temporaryName + ".resume"])
        let temporary = directory.file(Self.temporaryName).path
        #expect(unlink(temporary) == 0)
        #expect(plant(outside.url.path, temporary) == 0)

        _ = try await client.download("file", to: directory.file()).value
        #expect(outside.isUnchanged)
        #expect(server.requests.last?.header("Range") == nil, "a link is not resumed")
        #expect(fileType(directory.file()) == S_IFREG)
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(directory.names == ["download.bin"])
      }
    }
  }

  @Test func aSymlinkPlantedInPlaceOfAKeptPartialFileIsNotResumedThrough() async throws {
    try await resumeThroughAPlantedLink { symlink($0, $1) }
  }

  @Test func aHardLinkPlantedInPlaceOfAKeptPartialFileIsNotResumedThrough() async throws {
    try await resumeThroughAPlantedLink { link($0, $1) }
  }

  @Test func aSymlinkAtTheResumeRecordsNameIsNotWrittenThrough() async throws {
    let outside = try OutsideFile()
    defer { outside.remove() }
    try await withDownloadDirectory { directory in
      let record = directory.file(Self.temporaryName + ".resume")
      #expect(symlink(outside.url.path, record.path) == 0)
      try await withServer({ router in
        router.on("GET", "/file") { request in
          .resetMidBody(rangeResponse(Self.content, etag: "\"v1\"", for: request).0, afterBytes: 300_000)
        }
      }) { server in
        let client = server.client()
        let keep = DownloadOptions(keepsPartialFileOnFailure: true)
        let (result, _) = await outcome(of: client.download("file", to: directory.file(), options: keep))
        #expect((try? result.get()) == nil)
        #expect(outside.isUnchanged)
        #expect(fileType(record) == S_IFREG, "the record is a file of its own")
      }
    }
  }

  @Test func aFIFOAtTheTemporaryNameIsReplacedNotOpened() async throws {
    try await withDownloadDirectory { directory in
      #expect(mkfifo(directory.file(Self.temporaryName).path, 0o600) == 0)
      try await withServer({ router in
        router.on("GET", "/file") { request in
          .respond(rangeResponse(Self.content, etag: "\"v1\"", for: request).0)
        }
      }) { server in
        _ = try await server.client().download("file", to: directory.file()).value
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(directory.names == ["download.bin"])
      }
    }
  }
}
