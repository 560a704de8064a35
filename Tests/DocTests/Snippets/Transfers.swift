// The imports Docs/Transfers.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.transfers-imports
import Dispatch
import Foundation
import PromiseHTTP
import Promises
// snippet.end
import Testing

@Suite("Docs/Transfers.md", .timeLimit(.minutes(1)))
struct TransfersExamples {
  @Test func download() async throws {
    // snippet.transfers-download
    // snippet.hide
    let (output, print, server, _) = try MediaServer.example()
    let mediaServer = server.baseURL
    let recordings = server.recordings
    // snippet.show
    let client = HTTPClient(baseURL: mediaServer)
    let movie = recordings.appendingPathComponent("take-1.mp4")

    let download = try await client.download("recordings/take-1.mp4", to: movie).value
    print(download.byteCount)  // prints "131072"
    // snippet.hide
    #expect(output.lines == ["131072"])
    #expect(download.fileURL == movie.standardizedFileURL)
    #expect(download.response.statusCode == 200 && download.response.body.isEmpty)
    #expect(MediaServer.holdsTake(movie))
    #expect(server.files == ["take-1.mp4"])
    await server.stop()
    // snippet.end
  }

  @Test func existingDestination() async throws {
    // snippet.transfers-exists
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let movie = server.url("take-1.mp4")
    try Data("an older take".utf8).write(to: movie)
    // snippet.show
    do {
      _ = try await client.download("recordings/take-1.mp4", to: movie).value
    } catch TransferError.destinationExists(let url) {
      print("kept \(url.lastPathComponent)")  // prints "kept take-1.mp4": nothing was sent
    }

    let replaced = try await client.download(
      "recordings/take-1.mp4", to: movie, options: DownloadOptions(replacesExistingFile: true)
    ).value
    // snippet.hide
    #expect(output.lines == ["kept take-1.mp4"])
    #expect(server.requests.count == 1)
    #expect(replaced.byteCount == 131_072 && MediaServer.holdsTake(movie))
    await server.stop()
    // snippet.end
  }

  @Test func progressOnAQueue() async throws {
    // snippet.transfers-progress
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let movie = server.url("take-1.mp4")
    let fractions = LockedFractions()
    // snippet.show
    let ui = DispatchQueue(label: "ui")
    let progress = TransferProgressHandler(on: ui) { update in
      // snippet.hide
      dispatchPrecondition(condition: .onQueue(ui))
      fractions.append(update.fractionCompleted)
      // snippet.show
      if update.isFinal { print(update) }  // prints "131072 of 131072 bytes (final)"
    }

    let download = try await client.download("recordings/take-1.mp4", to: movie, progress: progress).value
    // snippet.hide
    #expect(await output.lines(count: 1) == ["131072 of 131072 bytes (final)"])
    #expect(download.byteCount == 131_072)
    let seen = fractions.values
    #expect(seen.first == 0 && seen.last == 1 && seen.count >= 2)
    await server.stop()
    // snippet.end
  }

  @Test func progressAsAPercentage() async throws {
    // snippet.transfers-progress-percent
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let movie = server.url("take-1.mp4")
    // snippet.show
    let progress = TransferProgressHandler { update in
      // Int64 bytes (a file can be larger than 2 GiB, and offsets are Int64): compute in Int64.
      guard let expected = update.expectedBytes, expected > 0 else { return }
      let percent: Int64 = update.completedBytes * 100 / expected
      if update.isFinal { print("\(percent)%") }  // prints "100%"
    }

    _ = try await client.download("recordings/take-1.mp4", to: movie, progress: progress).value
    // snippet.hide
    #expect(await output.lines(count: 1) == ["100%"])
    await server.stop()
    // snippet.end
  }

  @Test func progressAsAStream() async throws {
    // snippet.transfers-progress-stream
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let movie = server.url("take-1.mp4")
    // snippet.show
    let (progress, updates) = TransferProgressHandler.makeStream()
    let download = client.download("recordings/take-1.mp4", to: movie, progress: progress)

    var last: TransferProgress?
    for await update in updates {
      last = update  // the stream ends after the final update, or when the download fails
    }
    print(last?.description ?? "failed")  // prints "131072 of 131072 bytes (final)"
    let file = try await download.value
    // snippet.hide
    #expect(output.lines == ["131072 of 131072 bytes (final)"])
    #expect(file.byteCount == 131_072 && MediaServer.holdsTake(movie))
    await server.stop()
    // snippet.end
  }

  @Test func downloadErrors() async throws {
    // snippet.transfers-errors
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let movie = server.url("take-9.mp4")
    // snippet.show
    do {
      _ = try await client.download("recordings/take-9.mp4", to: movie).value
    } catch let error as HTTPError {
      print(error.statusCode ?? 0)  // prints "404": the network, the server, the time
    } catch let error as TransferError {
      print(error)  // the disk: the destination exists, the directory is read-only, the disk is full
    }
    print(FileManager.default.fileExists(atPath: movie.path))  // prints "false"
    // snippet.hide
    #expect(output.lines == ["404", "false"])
    #expect(server.files.isEmpty, "the temporary file is gone too")
    await server.stop()
    // snippet.end
  }

  @Test func resumeWithinRetries() async throws {
    // snippet.transfers-resume
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let movie = server.url("take-2.mp4")
    // snippet.show
    // The first attempt breaks off after 64 KiB.
    let download = try await client.download("flaky/take-2.mp4", to: movie).value
    print(download.response.statusCode)  // prints "206": the retry asked for the rest
    // the retry sent Range: bytes=65536- and If-Range: "take-2"
    // snippet.hide
    #expect(output.lines == ["206"])
    let attempts = server.requests
    #expect(attempts.count == 2)
    #expect(attempts.first?.header("Range") == nil)
    #expect(attempts.last?.header("Range") == "bytes=65536-")
    #expect(attempts.last?.header("If-Range") == "\"take-2\"")
    #expect(download.byteCount == 131_072 && MediaServer.holdsTake(movie))
    await server.stop()
    // snippet.end
  }

  @Test func rideOutARestart() async throws {
    // snippet.transfers-restart
    // snippet.hide
    let (output, print, server, _) = try MediaServer.example()
    let mediaServer = server.baseURL
    let movie = server.url("take-4.mp4")
    // snippet.show
    // Retries 0.5 s, 1.5 s, 3.5 s and 7.5 s after the failure: exact waits, no jitter.
    let patient = RetryPolicy(
      maximumAttempts: 5,
      backoff: .exponential(initial: .milliseconds(500), maximum: .seconds(4), jitter: .none))
    let client = HTTPClient(baseURL: mediaServer, configuration: .init(retryPolicy: patient))

    // The server restarts after 64 KiB and is down for 2 s.
    let download = try await client.download("restarting/take-4.mp4", to: movie).value
    print(download.response.statusCode)  // prints "206": resumed once the server was back
    // snippet.hide
    #expect(output.lines == ["206"])
    #expect(download.byteCount == 131_072 && MediaServer.holdsTake(movie))
    #expect(server.requests.last?.header("Range") == "bytes=65536-")
    await server.stop()
    // snippet.end
  }

  @Test("RetryPolicy.default gives up on a server that is down for 2 s")
  func theDefaultPolicyDoesNotRideOutARestart() async throws {
    // Docs/Transfers.md: 3 attempts, and waits of at most 0.5 s and 1 s: the last attempt starts
    // at most 1.5 s after the failure, before a 2 s outage ends. The bound is the policy's own
    // arithmetic (no clock read here: a loaded machine stretches what a test measures).
    let policy = RetryPolicy.default
    #expect(policy.maximumAttempts == 3)
    for (retry, bound) in [(1, Duration.milliseconds(500)), (2, .seconds(1))] {
      let waits = (0..<1_000).compactMap { _ in policy.delay(beforeRetry: retry) }
      #expect(waits.count == 1_000 && waits.allSatisfy { $0 >= .zero && $0 <= bound }, "retry \(retry)")
    }
    // Against a server that went down and stays down, the download fails after its 3 attempts.
    let (_, _, server, client) = try MediaServer.example()
    let movie = server.url("take-4.mp4")
    await #expect(throws: HTTPError.self) {
      _ = try await client.download("gone/take-4.mp4", to: movie).value
    }
    #expect(server.requests.count == 3)
    #expect(!FileManager.default.fileExists(atPath: movie.path))
    await server.stop()
  }

  @Test("The two engines send different User-Agents, and the one you set over both")
  func userAgents() async throws {
    // Docs/HTTP.md and Docs/Transfers.md: PromiseHTTP from the socket transport, for requests and
    // transfers alike; FoundationNetworking's through URLSession; defaultHeaders' over both.
    let (_, _, server, client) = try MediaServer.example()
    _ = try await client.get("stream/config", headers: ["Authorization": "Bearer tok-42"]).value
    _ = try await client.download("recordings/take-1.mp4", to: server.url("take-1.mp4")).value
    let defaults = server.requests.map { $0.header("User-Agent") ?? "" }
    #expect(defaults == ["PromiseHTTP", "PromiseHTTP"])
    var sessionEngine = HTTPClient.Configuration()
    sessionEngine.engine = .urlSession
    let viaSession = HTTPClient(baseURL: server.baseURL, configuration: sessionEngine)
    _ = try await viaSession.get("stream/config", headers: ["Authorization": "Bearer tok-42"]).value
    let curl = server.requests.dropFirst(2).map { $0.header("User-Agent") ?? "" }
    #expect(curl.count == 1 && curl[0].contains("(unknown version) curl/"), "\(curl)")
    sessionEngine.defaultHeaders = ["User-Agent": "Recorder/1.0"]
    let named = HTTPClient(baseURL: server.baseURL, configuration: sessionEngine)
    _ = try await named.get("stream/config", headers: ["Authorization": "Bearer tok-42"]).value
    let socketNamed = HTTPClient(
      baseURL: server.baseURL, configuration: .init(defaultHeaders: ["User-Agent": "Recorder/1.0"]))
    _ = try await socketNamed.download("recordings/take-1.mp4", to: server.url("take-1b.mp4")).value
    let set = server.requests.dropFirst(3).map { $0.header("User-Agent") }
    #expect(set == ["Recorder/1.0", "Recorder/1.0"])
    await server.stop()
  }

  @Test func resumeLater() async throws {
    // snippet.transfers-resume-later
    // snippet.hide
    let (output, print, server, _) = try MediaServer.example()
    let mediaServer = server.baseURL
    let movie = server.url("take-3.mp4")
    // snippet.show
    let client = HTTPClient(baseURL: mediaServer, configuration: .init(retryPolicy: .none))
    let keep = DownloadOptions(keepsPartialFileOnFailure: true)

    do {
      _ = try await client.download("flaky/take-3.mp4", to: movie, options: keep).value
    } catch {
      // 64 KiB stay in ".take-3.mp4.promisehttp-download", beside the destination
    }

    // Later — in this process or the next one:
    let download = try await client.download("flaky/take-3.mp4", to: movie).value
    print(download.byteCount)  // prints "131072": 64 KiB from disk, 64 KiB asked for with Range
    // snippet.hide
    #expect(output.lines == ["131072"])
    #expect(server.requests.count == 2)
    #expect(server.requests.last?.header("Range") == "bytes=65536-")
    #expect(server.requests.last?.header("If-Range") == "\"take-3\"")
    #expect(MediaServer.holdsTake(movie))
    #expect(server.files == ["take-3.mp4"])
    await server.stop()
    // snippet.end
  }

  @Test func keptPartialFile() async throws {
    // The partial file and its record are where the guide says they are.
    let server = try MediaServer.start()
    let client = HTTPClient(baseURL: server.baseURL, configuration: .init(retryPolicy: .none))
    let movie = server.url("take-3.mp4")
    let keep = DownloadOptions(keepsPartialFileOnFailure: true)
    await #expect(throws: HTTPError.self) {
      _ = try await client.download("flaky/take-3.mp4", to: movie, options: keep).value
    }
    #expect(server.files == [".take-3.mp4.promisehttp-download", ".take-3.mp4.promisehttp-download.resume"])
    let kept = server.url(".take-3.mp4.promisehttp-download")
    #expect(FileManager.default.contents(atPath: kept.path)?.count == 64 << 10)
    await server.stop()
  }

  @Test func oneDownloadPerDestination() async throws {
    // A second download to a destination another one is writing is refused, as the guide says.
    let (_, _, server, client) = try MediaServer.example()
    let movie = server.url("take-1.mp4")
    let first = client.download("slow/take-1.mp4", to: movie)
    do {
      _ = try await client.download("recordings/take-1.mp4", to: movie).value
      Issue.record("a second download to the same destination was not refused")
    } catch let error as TransferError {
      guard case .fileSystem("lock", _, let number) = error else {
        Issue.record("got \(error)")
        return
      }
      #expect(number == EWOULDBLOCK)
      #expect(error.description.contains("another download to the same destination"))
    }
    #expect(server.requests.allSatisfy { $0.path == "/slow/take-1.mp4" })
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
    await server.stop()
  }

  @Test func uploadTheRecording() async throws {
    // snippet.transfers-upload
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let recorder = StreamRecorder()
    let recording = try server.record("take-1.mp4")
    // snippet.show
    let progress = TransferProgressHandler(on: recorder.queue) { update in
      if update.isFinal { print("sent \(update)") }  // prints "sent 131072 of 131072 bytes (final)"
    }

    let stored = client.post("device/register", json: Registration(deviceID: "A1B2"))
      .decode(Token.self)
      .then { token in
        client.upload(
          .file(recording), to: "recordings/take-1.mp4", method: .put,
          headers: ["Authorization": "Bearer \(token.value)", "Content-Type": "video/mp4"],
          progress: progress)
      }
      .map { response in response.text }

    print(try await stored.value)  // prints "stored 131072 bytes"
    // snippet.hide
    let lines = await output.lines(count: 2)
    #expect(Set(lines) == ["sent 131072 of 131072 bytes (final)", "stored 131072 bytes"])
    let put = try #require(server.requests.last)
    #expect(put.header("Content-Length") == "131072" && put.header("Content-Type") == "video/mp4")
    #expect(put.body == MediaServer.takeBytes)
    await server.stop()
    // snippet.end
  }

  @Test func uploadResponseIsHeldToTheLimit() async throws {
    // snippet.transfers-upload-too-large
    // snippet.hide
    let (output, print, server, _) = try MediaServer.example()
    let mediaServer = server.baseURL
    let recording = try server.record("take-1.mp4")
    // snippet.show
    let client = HTTPClient(baseURL: mediaServer, configuration: .init(maximumResponseSize: 64 << 10))
    do {
      // "echo" answers with the 128 KiB it received.
      _ = try await client.upload(.file(recording), to: "echo", method: .put).value
    } catch HTTPError.tooLarge(let limit, _) {
      print(limit)  // prints "65536": the response, not the upload, is over the limit
    }
    // snippet.hide
    #expect(output.lines == ["65536"])
    #expect(server.requests.last?.body == MediaServer.takeBytes, "the whole file was sent")
    await server.stop()
    // snippet.end
  }

  @Test("The limit's error names download(_:to:) for an upload's response too")
  func uploadTooLargeNamesDownload() async throws {
    let (_, _, server, _) = try MediaServer.example()
    let client = HTTPClient(baseURL: server.baseURL, configuration: .init(maximumResponseSize: 64 << 10))
    let recording = try server.record("take-1.mp4")
    do {
      _ = try await client.upload(.file(recording), to: "echo", method: .put).value
      Issue.record("a 128 KiB response was delivered over a 64 KiB limit")
    } catch let error as HTTPError {
      guard case .tooLarge = error else {
        Issue.record("got \(error)")
        return
      }
      #expect(error.description.contains("maximumResponseSize"))
      #expect(error.description.contains("HTTPClient.download(_:to:)"))
    }
    await server.stop()
  }

  @Test func uploadChunks() async throws {
    // snippet.transfers-upload-stream
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let segmentBytes = MediaServer.takeBytes
    let segments = stride(from: 0, to: segmentBytes.count, by: 32 << 10).map {
      Data(segmentBytes[$0..<min($0 + (32 << 10), segmentBytes.count)])
    }
    // snippet.show
    let chunks = AsyncStream<Data> { continuation in
      for segment in segments { continuation.yield(segment) }  // 4 segments of 32 KiB
      continuation.finish()
    }

    let response = try await client.upload(
      .stream(chunks, length: 131_072), to: "recordings/take-2.mp4", method: .put
    ).value
    print(response.text)  // prints "stored 131072 bytes"
    // snippet.hide
    #expect(output.lines == ["stored 131072 bytes"])
    let put = try #require(server.requests.last)
    #expect(put.header("Content-Length") == "131072" && put.body == MediaServer.takeBytes)
    await server.stop()
    // snippet.end
  }

  @Test func multipart() async throws {
    // snippet.transfers-multipart
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let recording = try server.record("take-1.mp4")
    // snippet.show
    var form = MultipartForm()
    form.append("A1B2", name: "deviceID")
    form.append(fileAt: recording, name: "recording", contentType: "video/mp4")

    let response = try await client.upload(.multipart(form), to: "recordings").value
    print(response.statusCode)  // prints "201"
    // snippet.hide
    #expect(output.lines == ["201"])
    let post = try #require(server.requests.last)
    #expect(post.header("Content-Type") == form.contentType)
    #expect(form.contentType.hasPrefix("multipart/form-data; boundary=PromiseHTTP-"))
    #expect(post.header("Transfer-Encoding")?.lowercased() == "chunked")
    let text = String(decoding: post.body, as: UTF8.self)
    #expect(text.contains("Content-Disposition: form-data; name=\"deviceID\"\r\n\r\nA1B2\r\n"))
    #expect(
      text.contains(
        "Content-Disposition: form-data; name=\"recording\"; filename=\"take-1.mp4\"\r\nContent-Type: video/mp4\r\n\r\n"
      ))
    #expect(post.body.count > MediaServer.takeBytes.count)
    await server.stop()
    // snippet.end
  }

  @Test func multipartWithLength() async throws {
    // snippet.transfers-multipart-length
    // snippet.hide
    let (_, _, server, client) = try MediaServer.example()
    let recording = try server.record("take-1.mp4")
    let recordings = server.recordings
    var form = MultipartForm()
    form.append("A1B2", name: "deviceID")
    form.append(fileAt: recording, name: "recording", contentType: "video/mp4")
    // snippet.show
    let encoded = recordings.appendingPathComponent("form.bin")
    try form.write(to: encoded)

    let response = try await client.upload(
      .file(encoded), to: "recordings", headers: ["Content-Type": form.contentType]
    ).value
    // snippet.hide
    #expect(response.statusCode == 201)
    let post = try #require(server.requests.last)
    #expect(post.header("Content-Length") == String(post.body.count))
    #expect(post.header("Content-Type") == form.contentType)
    await server.stop()
    // snippet.end
  }

  @Test func chunks() async throws {
    // snippet.transfers-stream-chunks
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    // snippet.show
    let response = try await client.stream("recordings/take-1.mp4").value

    var received = 0
    for try await chunk in response.body {
      received += chunk.count  // chunks as they arrive; their sizes carry no meaning
    }
    print(received)  // prints "131072"
    // snippet.hide
    #expect(output.lines == ["131072"])
    await server.stop()
    // snippet.end
  }

  @Test func ndjson() async throws {
    // snippet.transfers-ndjson
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    // snippet.show
    struct IngestStatus: Decodable {
      let bitrateKbps: Int
      let droppedFrames: Int
    }

    let response = try await client.stream("stream/status").value
    for try await line in response.lines {
      let status = try JSONDecoder().decode(IngestStatus.self, from: Data(line.utf8))
      print(status.bitrateKbps)
    }
    // prints "2500", "2400", then "2600"
    // snippet.hide
    #expect(output.lines == ["2500", "2400", "2600"])
    await server.stop()
    // snippet.end
  }

  @Test func serverSentEvents() async throws {
    // snippet.transfers-sse
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    // snippet.show
    let events = try await client.stream("stream/events", headers: ["Accept": "text/event-stream"]).value

    var data: [String] = []
    for try await line in events.lines {
      if line.hasPrefix("data: ") {
        data.append(String(line.dropFirst(6)))
      } else if line.isEmpty, !data.isEmpty {  // an empty line ends an event
        print(data.joined(separator: " "))
        data = []
      }
    }
    // prints "connecting", then "live 1280x720"
    // snippet.hide
    #expect(output.lines == ["connecting", "live 1280x720"])
    await server.stop()
    // snippet.end
  }

  @Test func stopEarly() async throws {
    // snippet.transfers-break
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    // snippet.show
    let log = try await client.stream("stream/log").value
    for try await line in log.lines {
      print(line)
      if line.contains(#""frame":3"#) { break }  // cancels the request: the connection closes
    }
    // three lines printed, then the request is cancelled: the rest of the log is never read
    // snippet.hide
    #expect(output.lines == [#"{"frame":1}"#, #"{"frame":2}"#, #"{"frame":3}"#])
    #expect(await eventually { server.openConnectionCount == 0 })
    await server.stop()
    // snippet.end
  }

  @Test func deadline() async throws {
    // snippet.transfers-deadline
    // snippet.hide
    let (output, print, server, client) = try MediaServer.example()
    let movie = server.url("take-1.mp4")
    // snippet.show
    // The server sends 8 KiB every 100 ms: 1.6 s for the whole file.
    let download = client.download("slow/take-1.mp4", to: movie, deadline: .after(.milliseconds(300)))
    do {
      _ = try await download.value
    } catch HTTPError.timedOut {
      print("not within 300 ms")  // prints "not within 300 ms"
    }
    print(FileManager.default.fileExists(atPath: movie.path))  // prints "false"
    // snippet.hide
    #expect(output.lines == ["not within 300 ms", "false"])
    #expect(server.files.isEmpty)
    await server.stop()
    // snippet.end
  }

  @Test func cancel() async throws {
    // snippet.transfers-cancel
    // snippet.hide
    let (_, _, server, client) = try MediaServer.example()
    let movie = server.url("take-1.mp4")
    // snippet.show
    let download = client.download("slow/take-1.mp4", to: movie)
    download.cancel()  // rejects with CancellationError; the partial file is removed
    // snippet.hide
    await #expect(throws: CancellationError.self) { try await download.value }
    #expect(await eventually { server.files.isEmpty })
    await server.stop()
    // snippet.end
  }

  @Test func tooLarge() async throws {
    // snippet.transfers-too-large
    // snippet.hide
    let (output, print, server, _) = try MediaServer.example()
    let mediaServer = server.baseURL
    // snippet.show
    let client = HTTPClient(baseURL: mediaServer, configuration: .init(maximumResponseSize: 64 << 10))
    do {
      _ = try await client.get("recordings/take-1.mp4").value
    } catch HTTPError.tooLarge(let limit, _) {
      print(limit)  // prints "65536": download(_:to:) or stream(_:) instead
    }
    // snippet.hide
    #expect(output.lines == ["65536"])
    await server.stop()
    // snippet.end
  }
}

/// The fractions a progress handler saw, in order.
private final class LockedFractions: Sendable {
  private let box = NSLockedBox<[Double?]>([])

  func append(_ value: Double?) { box.withLock { $0.append(value) } }
  var values: [Double?] { box.withLock { $0 } }
}

/// A value guarded by an `NSLock`.
private final class NSLockedBox<Value>: @unchecked Sendable {
  // Safety: `value` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var value: Value

  init(_ value: Value) { self.value = value }

  func withLock<R>(_ body: (inout Value) -> R) -> R {
    lock.lock()
    defer { lock.unlock() }
    return body(&value)
  }
}

/// Polls `condition` every 10 ms for up to 5 s; `true` as soon as it holds.
private func eventually(_ condition: @Sendable () -> Bool) async -> Bool {
  for _ in 0..<500 {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(10))
  }
  return condition()
}
