import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

/// A download that breaks mid-body continues from the bytes on disk, or starts over cleanly;
/// the file always ends byte-identical to the resource.
@Suite("Download resume", .timeLimit(.minutes(1)))
struct DownloadResumeTests {
  static let content = downloadContent(3 << 20)
  static let cut = 1_200_000

  /// The first request is cut after `cut` bytes; later ones get `later(call, request)`.
  func serve(
    _ router: Router, _ later: @escaping @Sendable (Int, RecordedRequest) -> ServerAction
  ) {
    let calls = Counter()
    router.on("GET", "/file") { request in
      let call = calls.next()
      guard call > 1 else {
        return .resetMidBody(
          rangeResponse(Self.content, etag: "\"v1\"", for: request).0, afterBytes: Self.cut)
      }
      return later(call, request)
    }
  }

  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func aConnectionCutMidBodyResumesWithRangeAndIfRange(_ transport: HTTPClient.Engine) async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        serve(router) { _, request in .respond(rangeResponse(Self.content, etag: "\"v1\"", for: request).0) }
      }) { server in
        let client = server.client(retryPolicy: quickRetries(), engine: transport)
        let download = try await client.download("file", to: directory.file()).value
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(download.byteCount == Int64(Self.content.count))
        #expect(download.response.statusCode == 206)
        let requests = server.requests
        try #require(requests.count == 2)
        let range = try #require(requests[1].header("Range"))
        let offset = try #require(Int(range.dropFirst("bytes=".count).dropLast()))
        #expect(range == "bytes=\(offset)-")
        #expect(offset > 0 && offset <= Self.cut)
        #expect(requests[1].header("If-Range") == "\"v1\"")
        #expect(directory.names == ["download.bin"])
        expectSent(over: transport, requests)
      }
    }
  }

  @Test func lastModifiedIsTheValidatorWithoutAStrongETag() async throws {
    let date = "Wed, 21 Oct 2015 07:28:00 GMT"
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        let calls = Counter()
        router.on("GET", "/file") { request in
          var (response, _) = rangeResponse(Self.content, etag: nil, lastModified: date, for: request)
          response.headers.append(("ETag", "W/\"weak\""))
          return calls.next() == 1 ? .resetMidBody(response, afterBytes: Self.cut) : .respond(response)
        }
      }) { server in
        let client = server.client(retryPolicy: quickRetries())
        _ = try await client.download("file", to: directory.file()).value
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(server.requests.last?.header("If-Range") == date)
        #expect(server.requests.last?.header("Range") != nil)
      }
    }
  }

  @Test func aServerThatIgnoresRangeRestartsTheFileCleanly() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        serve(router) { _, _ in
          .respond(ServerResponse(headers: [("ETag", "\"v1\"")], body: Self.content))
        }
      }) { server in
        let client = server.client(retryPolicy: quickRetries())
        let download = try await client.download("file", to: directory.file()).value
        #expect(download.response.statusCode == 200)
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(server.requests.count == 2)
        #expect(server.requests.last?.header("Range") != nil)
      }
    }
  }

  @Test(arguments: [HTTPClient.Engine.automatic, .urlSession])
  func aContentRangeThatStartsElsewhereStartsOver(_ transport: HTTPClient.Engine) async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        serve(router) { _, request in
          guard let range = request.header("Range") else {
            return .respond(rangeResponse(Self.content, etag: "\"v1\"", for: request).0)
          }
          // A broken cache: the bytes from 1000 on, whatever was asked.
          _ = range
          let start = 1000
          return .respond(
            ServerResponse(
              status: 206,
              headers: [
                ("ETag", "\"v1\""),
                ("Content-Range", "bytes \(start)-\(Self.content.count - 1)/\(Self.content.count)"),
              ], body: Array(Self.content[start...])))
        }
      }) { server in
        let client = server.client(retryPolicy: quickRetries(), engine: transport)
        _ = try await client.download("file", to: directory.file()).value
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        let requests = server.requests
        #expect(requests.count == 3)
        #expect(requests[1].header("Range") != nil)
        #expect(requests[2].header("Range") == nil, "the attempt after a wrong range asks for everything")
        expectSent(over: transport, requests)
      }
    }
  }

  @Test func aWrongContentRangeWithoutRetriesFailsWithAClearErrorAndNoFile() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        serve(router) { _, _ in
          .respond(
            ServerResponse(
              status: 206,
              headers: [("ETag", "\"v1\""), ("Content-Range", "bytes 5-9/\(Self.content.count)")],
              body: Array(Self.content[5...9])))
        }
      }) { server in
        let client = server.client(retryPolicy: quickRetries(2))
        let (result, _) = await outcome(of: client.download("file", to: directory.file()))
        guard case .transport(let error, _)? = httpError(result) else {
          Issue.record("got \(String(describing: httpError(result)))")
          return
        }
        #expect(error.code == .badServerResponse)
        #expect("\(httpError(result)!)".contains("bytes 5-9"), "\(httpError(result)!)")
        #expect(directory.names.isEmpty)
      }
    }
  }

  @Test func aChangedETagBetweenAttemptsRestartsWithTheNewVersion() async throws {
    let newer = downloadContent(Self.content.count, seed: 7)
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        // The resource changed after the cut: If-Range no longer matches, so the server sends
        // the new version whole.
        serve(router) { _, request in .respond(rangeResponse(newer, etag: "\"v2\"", for: request).0) }
      }) { server in
        let client = server.client(retryPolicy: quickRetries())
        let download = try await client.download("file", to: directory.file()).value
        #expect(download.response.statusCode == 200)
        #expect(directory.fingerprint() == Fingerprint(newer))
        #expect(server.requests.last?.header("If-Range") == "\"v1\"")
      }
    }
  }

  @Test func aPartialResponseOfAnotherVersionStartsOver() async throws {
    let newer = downloadContent(Self.content.count, seed: 7)
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        // A server that ignores If-Range: the asked bytes, but of the new version.
        serve(router) { _, request in
          var stripped = request.headers
          stripped.removeAll { $0.name.lowercased() == "if-range" }
          let unconditional = RecordedRequest(method: request.method, path: request.path, headers: stripped)
          return .respond(rangeResponse(newer, etag: "\"v2\"", for: unconditional).0)
        }
      }) { server in
        let client = server.client(retryPolicy: quickRetries())
        _ = try await client.download("file", to: directory.file()).value
        #expect(directory.fingerprint() == Fingerprint(newer))
        let requests = server.requests
        #expect(requests.count == 3)
        #expect(requests[2].header("Range") == nil)
      }
    }
  }

  @Test func aBodyShorterThanItsContentLengthIsResumed() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        let calls = Counter()
        router.on("GET", "/file") { request in
          let response = rangeResponse(Self.content, etag: "\"v1\"", for: request).0
          return calls.next() == 1 ? .truncatedBody(response, sendBytes: Self.cut) : .respond(response)
        }
      }) { server in
        let client = server.client(retryPolicy: quickRetries())
        _ = try await client.download("file", to: directory.file()).value
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(server.requests.last?.header("Range") != nil)
      }
    }
  }

  @Test func aBodyShorterThanItsContentLengthWithoutRetriesFailsAndLeavesNoFile() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in
          .truncatedBody(ServerResponse(body: Self.content), sendBytes: Self.cut)
        }
      }) { server in
        let (result, _) = await outcome(of: server.client().download("file", to: directory.file()))
        guard case .transport(let error, _)? = httpError(result) else {
          Issue.record("got \(String(describing: httpError(result)))")
          return
        }
        #expect(error.code == .networkConnectionLost)
        #expect(directory.names.isEmpty)
      }
    }
  }

  @Test func aBodyLongerThanItsContentLengthIsCutToTheDeclaredLength() async throws {
    let declared = 1 << 20
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/file") { _ in
          .wrongContentLength(
            ServerResponse(headers: [("Connection", "close")], body: Self.content), declared: declared)
        }
      }) { server in
        let download = try await server.client().download("file", to: directory.file()).value
        #expect(download.byteCount == Int64(declared))
        #expect(directory.fingerprint() == Fingerprint(Array(Self.content.prefix(declared))))
      }
    }
  }

  @Test func aKeptPartialFileIsResumedByALaterDownload() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        serve(router) { _, request in .respond(rangeResponse(Self.content, etag: "\"v1\"", for: request).0) }
      }) { server in
        let client = server.client()
        let keep = DownloadOptions(keepsPartialFileOnFailure: true)
        let (first, _) = await outcome(of: client.download("file", to: directory.file(), options: keep))
        #expect(httpError(first) != nil)
        #expect(
          directory.names == [
            ".download.bin.promisehttp-download", ".download.bin.promisehttp-download.resume",
          ])
        let kept = try #require(directory.contents(".download.bin.promisehttp-download"))
        #expect(kept.count > 0 && Fingerprint(kept) == Fingerprint(Self.content.prefix(kept.count)))

        let download = try await client.download("file", to: directory.file()).value
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(download.response.statusCode == 206)
        #expect(server.requests.last?.header("Range") == "bytes=\(kept.count)-")
        #expect(server.requests.last?.header("If-Range") == "\"v1\"")
        #expect(directory.names == ["download.bin"])
      }
    }
  }

  @Test func aKeptPartialFileIsNotResumedForAnotherURLOrWhenResumingIsOff() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        router.on("GET", "/b") { request in
          .respond(rangeResponse(Self.content, etag: "\"v1\"", for: request).0)
        }
        for path in ["/a", "/c"] {
          let calls = Counter()
          router.on("GET", path) { request in
            let response = rangeResponse(Self.content, etag: "\"v1\"", for: request).0
            return calls.next() == 1 ? .resetMidBody(response, afterBytes: Self.cut) : .respond(response)
          }
        }
      }) { server in
        let client = server.client()
        let keep = DownloadOptions(keepsPartialFileOnFailure: true)
        _ = await outcome(of: client.download("a", to: directory.file(), options: keep))
        #expect(directory.names.count == 2)
        _ = try await client.download("b", to: directory.file(), options: keep).value
        #expect(server.requests.last?.header("Range") == nil, "kept for /a, not resumed for /b")
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        try FileManager.default.removeItem(at: directory.file())

        _ = await outcome(of: client.download("c", to: directory.file(), options: keep))
        #expect(directory.names.count == 2)
        let fresh = DownloadOptions(resumesPartialFile: false)
        _ = try await client.download("c", to: directory.file(), options: fresh).value
        #expect(server.requests.last?.header("Range") == nil)
        #expect(directory.fingerprint() == Fingerprint(Self.content))
        #expect(directory.names == ["download.bin"])
      }
    }
  }

  @Test func aRangeTheServerCannotSatisfyStartsOver() async throws {
    try await withDownloadDirectory { directory in
      try await withServer({ router in
        // The resource shrank: the kept bytes reach past its end.
        let shorter = Array(Self.content.prefix(Self.cut / 2))
        let calls = Counter()
        router.on("GET", "/file") { request in
          if calls.next() == 1 {
            return .resetMidBody(
              rangeResponse(Self.content, etag: "\"v1\"", for: request).0, afterBytes: Self.cut)
          }
          if request.header("Range") != nil {
            return .respond(
              ServerResponse(status: 416, headers: [("Content-Range", "bytes */\(shorter.count)")]))
          }
          return .respond(ServerResponse(headers: [("ETag", "\"v2\"")], body: shorter))
        }
      }) { server in
        let client = server.client(retryPolicy: quickRetries())
        let download = try await client.download("file", to: directory.file()).value
        #expect(download.byteCount == Int64(Self.cut / 2))
        #expect(directory.fingerprint() == Fingerprint(Self.content.prefix(Self.cut / 2)))
        let requests = server.requests
        #expect(requests.count == 3)
        #expect(requests[1].header("Range") != nil)
        #expect(requests[2].header("Range") == nil)
      }
    }
  }
}
