// The story PromiseHTTP was made for: register the device → get a token → fetch the JSON stream
// configuration → parse it → apply it on the recorder's queue → start recording. It reads like
// the sequential code it replaces, and each step prints what it did.
//
//   swift run ConfigStory                              # against an embedded loopback server
//   swift run ConfigStory --server https://config.example.com/
import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises

struct Registration: Encodable {
  let deviceID: String
}

struct Token: Decodable, Sendable {
  let value: String
  let expiresIn: Int
}

struct StreamConfig: Decodable, Sendable {
  let ingestURL: String
  let bitrateKbps: Int
  let resolution: String
}

/// The recorder: its state belongs to `queue`, where every configuration is applied.
final class Recorder: @unchecked Sendable {
  // Safety of `@unchecked Sendable`: `config` is touched only on `queue` (checked below).
  let queue = DispatchQueue(label: "recorder")
  private var config: StreamConfig?

  func apply(_ config: StreamConfig) {
    dispatchPrecondition(condition: .onQueue(queue))
    self.config = config
    print("5. applied on the recorder queue: \(config.resolution) at \(config.bitrateKbps) kbps")
  }

  func start() {
    dispatchPrecondition(condition: .onQueue(queue))
    print("recording started → \(config?.ingestURL ?? "?")")
  }
}

/// Starts an in-process server with the two routes of the story (the embedded default).
func startEmbeddedServer() throws -> LoopbackServer {
  // libcurl would send loopback requests to an `http_proxy` from the environment.
  setenv("no_proxy", "127.0.0.1,127.0.0.2,localhost", 1)
  let router = Router()
  router.on("POST", "/device/register") { _ in .respond(.json(#"{"value":"tok-42","expiresIn":3600}"#)) }
  router.on("GET", "/stream/config") { request in
    guard request.header("Authorization") == "Bearer tok-42" else {
      return .respond(.text("no token", status: 401))
    }
    return .respond(
      .json(#"{"ingestURL":"rtmp://127.0.0.1/live/device-1","bitrateKbps":2500,"resolution":"1280x720"}"#))
  }
  return try LoopbackServer(router: router)
}

func fail(_ message: String) -> Never {
  FileHandle.standardError.write(Data("ConfigStory failed: \(message)\n".utf8))
  exit(1)
}

let arguments = CommandLine.arguments
var server: LoopbackServer?
let baseURL: URL
if let flag = arguments.firstIndex(of: "--server") {
  guard flag + 1 < arguments.count, let url = URL(string: arguments[flag + 1]), url.host != nil else {
    fail("--server needs a URL, for example --server https://config.example.com/")
  }
  baseURL = url
} else {
  do { server = try startEmbeddedServer() } catch { fail("could not start the embedded server: \(error)") }
  baseURL = server!.baseURL
}

let client = HTTPClient(baseURL: baseURL, configuration: .init(timeout: .seconds(10)))
let recorder = Recorder()
print("0. config server: \(baseURL.absoluteString)")
print("1. registering the device")

let story =
  client.post("device/register", json: Registration(deviceID: "device-1"))
  .decode(Token.self)
  .then { token in
    print("2. got a token, valid for \(token.expiresIn) s; fetching the stream config")
    return client.get("stream/config", headers: ["Authorization": "Bearer \(token.value)"])
  }
  .get { response in
    print("3. fetched the config: \(response.statusCode), \(response.body.count) bytes of JSON")
  }
  .decode(StreamConfig.self)
  .done(on: recorder.queue) { config in
    print("4. parsed the config: ingest at \(config.ingestURL)")
    recorder.apply(config)
    recorder.start()
  }

do {
  try story.wait(timeout: 30)
  server?.stop()
} catch {
  server?.stop()
  fail("\(error)")
}
