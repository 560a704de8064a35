import Dispatch
import Foundation
import LoopbackHTTPServer

/// The config server of the seed story, on loopback sockets, for the HTTP examples.
///
/// Each example starts its own server (`DocServer.start()`) and stops it at the end.
final class DocServer: Sendable {
  let server: LoopbackServer

  /// `http://127.0.0.1:<port>/`.
  var baseURL: URL { server.baseURL }

  /// The requests received so far.
  var requests: [ReceivedRequest] { server.requests.map(ReceivedRequest.init) }

  private init(server: LoopbackServer) {
    self.server = server
  }

  static let token = #"{"value":"tok-42","expiresIn":3600}"#
  static let config =
    #"{"ingestURL":"rtmp://media.example.com/live/A1B2","bitrateKbps":2500,"resolution":"1280x720"}"#

  /// Starts a server with the story's routes and a few that misbehave on purpose.
  static func start() throws -> DocServer {
    LoopbackServer.bypassEnvironmentProxy()
    let router = Router()
    router.on("POST", "/device/register") { _ in .respond(.json(token)) }
    router.on("GET", "/stream/config") { request in
      guard request.header("Authorization") == "Bearer tok-42" else {
        return .respond(.text("missing or expired token", status: 401))
      }
      return .respond(.json(config))
    }
    router.on("GET", "/stream/config-v0") { _ in
      .respond(.json(#"{"ingestURL":"rtmp://media.example.com/live/A1B2","bitrateKbps":"high"}"#))
    }
    let calls = Counter()
    router.on("GET", "/busy/config") { _ in
      guard calls.next() > 1 else {
        var busy = ServerResponse.text("try again", status: 503)
        busy.headers.append(("Retry-After", "0"))
        return .respond(busy)
      }
      return .respond(.json(config))
    }
    router.on("GET", "/slow/config") { _ in .slowHeaders(.json(config), delay: .seconds(60)) }
    let server = try LoopbackServer(router: router)
    let second = server.secondBaseURL.absoluteString
    router.on("GET", "/old/config") { _ in .respond(.redirect(to: second + "echo/authorization")) }
    router.on("GET", "/echo/authorization") { request in
      .respond(
        .text(request.header("Authorization") == nil ? "no Authorization header" : "Authorization leaked"))
    }
    return DocServer(server: server)
  }

  /// Stops the server off Swift's cooperative pool (stopping waits for the server's threads).
  func stop() async {
    await server.stopOffThePool()
  }
}

extension LoopbackServer {
  /// Stops the server on a Dispatch thread and waits: stopping blocks until the server's threads
  /// end, which must not hold one of the cooperative pool's few threads.
  func stopOffThePool() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      DispatchQueue.global().async {
        self.stop()
        continuation.resume()
      }
    }
  }
}

/// A loopback address that refuses every connection, as a server that is down does: the base
/// URL of the HTTP guide's transport-error example.
final class RefusingServer: Sendable {
  private let port: ClosedPort

  init() throws { port = try ClosedPort() }

  /// `http://127.0.0.1:<port>/`.
  var baseURL: URL { port.baseURL }
}
