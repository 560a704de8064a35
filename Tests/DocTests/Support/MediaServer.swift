import Foundation
import LoopbackHTTPServer
import PromiseHTTP

/// The media server of the transfer examples, on loopback sockets: recordings to download
/// (some of them cut off on the first attempt), uploads to receive, and streams of lines.
final class MediaServer: Sendable {
  let server: LoopbackServer
  /// A scratch directory for the example's files, removed by `stop()`.
  let recordings: URL

  /// The bytes of `recordings/take-1.mp4` and of the recordings the examples upload: 128 KiB.
  static let take = GeneratedBody(length: 128 << 10, seed: 7)
  /// The bytes of `take`.
  static var takeBytes: [UInt8] { take.allBytes }

  var baseURL: URL { server.baseURL }
  /// The connections still open (a stream the reader stopped closes its own).
  var openConnectionCount: Int { server.openConnectionCount }
  var requests: [ReceivedRequest] { server.requests.map(ReceivedRequest.init) }

  private init(server: LoopbackServer, recordings: URL) {
    self.server = server
    self.recordings = recordings
  }

  /// The body of `stream/status`: three lines of NDJSON, CRLF-separated, no newline after the last.
  static let status = [2_500, 2_400, 2_600].map { #"{"bitrateKbps":\#($0),"droppedFrames":0}"# }
    .joined(separator: "\r\n")
  /// The body of `stream/events`: two server-sent events and a comment.
  static let events = "event: state\ndata: connecting\n\n: keep-alive\n\ndata: live\ndata: 1280x720\n\n"

  static func start() throws -> MediaServer {
    LoopbackServer.bypassEnvironmentProxy()
    let router = Router()
    router.on("POST", "/device/register") { _ in .respond(.json(DocServer.token)) }
    router.on("GET", "/stream/config") { request in
      guard request.header("Authorization") == "Bearer tok-42" else {
        return .respond(.text("missing or expired token", status: 401))
      }
      return .respond(.json(DocServer.config))
    }
    // 128 KiB in 16 KiB pieces, 10 ms apart: a download that progress can follow.
    router.on("GET", "/recordings/take-1.mp4") { _ in
      .stream(
        StreamedResponse(
          body: take, etag: "\"take-1\"", faults: [.drip(chunkSize: 16 << 10, interval: .milliseconds(10))]))
    }
    // The first attempt of each breaks off after 64 KiB; later ones honour Range.
    for name in ["take-2", "take-3"] {
      let calls = Counter()
      router.on("GET", "/flaky/\(name).mp4") { _ in
        .stream(
          StreamedResponse(
            body: take, etag: "\"\(name)\"", faults: calls.next() == 1 ? [.closeAfter(bytes: 64 << 10)] : []))
      }
    }
    // 128 KiB over 1.6 s.
    router.on("GET", "/slow/take-1.mp4") { _ in
      .stream(
        StreamedResponse(
          body: take, etag: "\"take-1\"", faults: [.drip(chunkSize: 8 << 10, interval: .milliseconds(100))]))
    }
    router.on("PUT", "/recordings/take-1.mp4") { request in
      guard request.header("Authorization") == "Bearer tok-42" else {
        return .respond(.text("missing or expired token", status: 401))
      }
      return .respond(.text("stored \(request.body.count) bytes", status: 201))
    }
    router.on("PUT", "/recordings/take-2.mp4") { request in
      .respond(.text("stored \(request.body.count) bytes", status: 201))
    }
    // Answers with the body it received: an upload whose response is as large as what it sent.
    router.on("PUT", "/echo") { request in .respond(ServerResponse(body: request.body)) }
    // A server that goes down after 64 KiB and stays down: what a policy sees of an outage
    // longer than its waits, whatever the machine's speed.
    let gone = RequestCounter()
    router.on("GET", "/gone/take-4.mp4") { _ in
      gone.next() == 1
        ? .stream(StreamedResponse(body: take, etag: "\"take-4\"", faults: [.closeAfter(bytes: 64 << 10)]))
        : .closeImmediately
    }
    // A server that restarts: the first answer breaks off after 64 KiB, then every connection is
    // closed at once for 2 s (the server is down), then Range is honoured again.
    let restart = RestartWindow()
    router.on("GET", "/restarting/take-4.mp4") { _ in
      switch restart.next() {
      case .first:
        return .stream(
          StreamedResponse(body: take, etag: "\"take-4\"", faults: [.closeAfter(bytes: 64 << 10)]))
      case .down:
        return .closeImmediately
      case .up:
        return .stream(StreamedResponse(body: take, etag: "\"take-4\""))
      }
    }
    router.on("POST", "/recordings") { request in
      .respond(.text("stored a form of \(request.body.count) bytes", status: 201))
    }
    router.on("GET", "/stream/status") { _ in
      // 7-byte pieces: lines and JSON cut across chunks.
      .trickle(
        ServerResponse(headers: [("Content-Type", "application/x-ndjson")], body: Array(status.utf8)),
        chunkSize: 7, interval: .milliseconds(1))
    }
    router.on("GET", "/stream/events") { _ in
      .chunked(
        ServerResponse(headers: [("Content-Type", "text/event-stream")], body: Array(events.utf8)),
        chunkSize: 5)
    }
    // A line every 20 ms for 10 s: the reader stops long before the end.
    router.on("GET", "/stream/log") { _ in
      // About 60 s in all: only a cancelled request closes its connection within `eventually`.
      let lines = (1...3000).map { #"{"frame":\#($0)}"# + "\n" }.joined()
      return .trickle(ServerResponse(body: Array(lines.utf8)), chunkSize: 12, interval: .milliseconds(20))
    }
    let recordings = FileManager.default.temporaryDirectory.appendingPathComponent(
      "TransfersDoc-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: recordings, withIntermediateDirectories: true)
    return MediaServer(server: try LoopbackServer(router: router), recordings: recordings)
  }

  /// What an example binds before its visible lines: the output its `print` writes to (which
  /// the hidden assertions read), that `print`, a server of its own and a client for it.
  typealias Example = (
    output: DocOutput, print: @Sendable (Any) -> Void, server: MediaServer, client: HTTPClient
  )

  /// Starts a server for one example; the example stops it with `stop()`.
  static func example() throws -> Example {
    let output = DocOutput()
    let server = try start()
    return (output, output.print, server, HTTPClient(baseURL: server.baseURL))
  }

  /// The URL of `name` in `recordings`; nothing is written there.
  func url(_ name: String) -> URL {
    recordings.appendingPathComponent(name)
  }

  /// Writes `take` to `name` in `recordings`, as the recorder would have, and returns its URL.
  func record(_ name: String) throws -> URL {
    let file = url(name)
    try Data(Self.take.allBytes).write(to: file)
    return file
  }

  /// The names of the files in `recordings`, sorted, hidden ones included.
  var files: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: recordings.path)) ?? []).sorted()
  }

  /// Whether the file at `url` holds exactly the bytes of `take`.
  static func holdsTake(_ url: URL) -> Bool {
    FileManager.default.contents(atPath: url.path).map { Array($0) == take.allBytes } ?? false
  }

  /// Stops the server off Swift's cooperative pool and removes `recordings`.
  func stop() async {
    await server.stopOffThePool()
    try? FileManager.default.removeItem(at: recordings)
  }
}

/// The state of the media server's restarting route: down for 2 s after its first answer.
private final class RestartWindow: @unchecked Sendable {
  // Safety: `downUntil` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var downUntil: ContinuousClock.Instant?

  enum Phase { case first, down, up }

  /// The phase of the request arriving now; the first call starts the 2 s outage.
  func next() -> Phase {
    lock.lock()
    defer { lock.unlock() }
    let now = ContinuousClock.now
    guard let downUntil else {
      downUntil = now + .seconds(2)
      return .first
    }
    return now < downUntil ? .down : .up
  }
}

/// Counts the requests of a route.
private final class RequestCounter: @unchecked Sendable {
  // Safety: `count` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var count = 0

  /// The number of this request, from 1.
  func next() -> Int {
    lock.lock()
    defer { lock.unlock() }
    count += 1
    return count
  }
}
