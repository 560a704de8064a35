import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// Workload 6: the story's auth → fetch → parse chain over loopback, three requests per chain:
// POST device/register → POST auth/token → GET stream/config (with the bearer token) → decode.
// `urlsession` is the same three requests written by hand with `URLSession` completion handlers
// and `JSONDecoder` (THE baseline of this workload); `promise` is the PromiseHTTP chain over the
// default engine (on Linux the socket transport, its connections kept alive), and
// `promise-urlsession` the same chain with `engine = .urlSession`. All talk to one in-process
// LoopbackServer over real sockets, each with its own client or ephemeral session.

private struct Registration: Codable, Sendable {
  let deviceID: String
}

private struct Token: Codable, Sendable {
  let value: String
}

private struct StreamConfig: Codable, Sendable {
  let bitrateKbps: Int
}

/// The server of the HTTP workload, started on first use and kept for the whole run.
private let storyServer: LoopbackServer? = {
  // libcurl would send loopback requests to an `http_proxy` from the environment.
  setenv("no_proxy", "127.0.0.1,127.0.0.2,localhost", 1)
  let router = Router()
  router.on("POST", "/device/register") { _ in .respond(.json(#"{"deviceID":"device-1"}"#)) }
  router.on("POST", "/auth/token") { _ in .respond(.json(#"{"value":"tok-42"}"#)) }
  router.on("GET", "/stream/config") { request in
    guard request.header("Authorization") == "Bearer tok-42" else {
      return .respond(.text("no token", status: 401))
    }
    return .respond(.json(#"{"bitrateKbps":2500}"#))
  }
  return try? LoopbackServer(router: router)
}()

extension Plan {
  func httpCases() -> [BenchCase] {
    var workload = workload(
      "http", "register → token → config → decode over loopback, three requests per chain",
      unit: "chain", units: (full: 20, smoke: 1), samples: 20)
    workload.baselineVariant = "urlsession"
    let chains = workload.units
    // Each chain yields the config's bitrate.
    let expected = chains * 2500

    return [
      BenchCase(workload: workload, variant: "urlsession", expected: expected) {
        guard let server = storyServer else { throw BenchmarkFailure("the loopback server did not start") }
        let raw = RawStoryClient(baseURL: server.baseURL)
        return {
          var sum = 0
          for _ in 0..<chains { sum &+= try raw.runChain() }
          return sum
        }
      },
      promiseCase(workload, variant: "promise", engine: .automatic, expected: expected),
      promiseCase(workload, variant: "promise-urlsession", engine: .urlSession, expected: expected),
    ]
  }

  /// The PromiseHTTP chain over `engine`: the socket transport with kept-alive connections
  /// (`.automatic`, on Linux), or the client's `URLSession`.
  private func promiseCase(
    _ workload: Workload, variant: String, engine: HTTPClient.Engine, expected: Int
  ) -> BenchCase {
    let chains = workload.units
    return BenchCase(workload: workload, variant: variant, expected: expected) {
      guard let server = storyServer else { throw BenchmarkFailure("the loopback server did not start") }
      var configuration = HTTPClient.Configuration(callbackQueue: callbackQueue)
      configuration.engine = engine
      let client = HTTPClient(baseURL: server.baseURL, configuration: configuration)
      return {
        var sum = 0
        for _ in 0..<chains {
          let bitrate = client.post("device/register", json: Registration(deviceID: "device-1"))
            .decode(on: callbackQueue, Registration.self)
            .then(on: callbackQueue) { registration in
              client.post("auth/token", json: registration)
            }
            .decode(on: callbackQueue, Token.self)
            .then(on: callbackQueue) { token in
              client.get("stream/config", headers: ["Authorization": "Bearer \(token.value)"])
            }
            .decode(on: callbackQueue, StreamConfig.self)
            .map(on: callbackQueue) { config in config.bitrateKbps }
          sum &+= try bitrate.wait(timeout: waitLimitSeconds)
        }
        return sum
      }
    }
  }
}

/// The same three requests written the way a user would without promises: nested completion
/// handlers, each checking the status and decoding the body.
private final class RawStoryClient: Sendable {
  let baseURL: URL
  let session: URLSession

  init(baseURL: URL) {
    self.baseURL = baseURL
    self.session = URLSession(configuration: .ephemeral)
  }

  /// Runs register → token → config and returns the bitrate, blocking until done.
  func runChain() throws -> Int {
    let done = DispatchSemaphore(value: 0)
    let outcome = LockedResult()
    send("device/register", method: "POST", body: Registration(deviceID: "device-1"), bearer: nil) {
      (registration: Result<Registration, any Error>) in
      switch registration {
      case .failure(let error):
        outcome.set(.failure(error))
        done.signal()
      case .success(let registration):
        self.send("auth/token", method: "POST", body: registration, bearer: nil) {
          (token: Result<Token, any Error>) in
          switch token {
          case .failure(let error):
            outcome.set(.failure(error))
            done.signal()
          case .success(let token):
            self.send("stream/config", method: "GET", body: nil as Registration?, bearer: token.value) {
              (config: Result<StreamConfig, any Error>) in
              outcome.set(config.map(\.bitrateKbps))
              done.signal()
            }
          }
        }
      }
    }
    try waitOrFail(done, "the URLSession chain")
    return try outcome.get()
  }

  private func send<Body: Encodable, Reply: Decodable & Sendable>(
    _ path: String, method: String, body: Body?, bearer: String?,
    completion: @escaping @Sendable (Result<Reply, any Error>) -> Void
  ) {
    var request = URLRequest(url: baseURL.appendingPathComponent(path))
    request.httpMethod = method
    if let body {
      request.httpBody = try? JSONEncoder().encode(body)
      request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    }
    if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
    session.dataTask(with: request) { data, response, error in
      if let error { return completion(.failure(error)) }
      guard let http = response as? HTTPURLResponse, (200..<300).contains(http.statusCode), let data else {
        return completion(.failure(BenchmarkFailure("unexpected response to \(path)")))
      }
      completion(Result { try JSONDecoder().decode(Reply.self, from: data) })
    }.resume()
  }
}

/// The outcome of one raw chain, written by a completion handler and read by the waiter.
private final class LockedResult: @unchecked Sendable {
  // Safety of `@unchecked Sendable`: `value` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var value: Result<Int, any Error> = .failure(BenchmarkFailure("no result"))

  func set(_ result: Result<Int, any Error>) {
    lock.lock()
    value = result
    lock.unlock()
  }

  func get() throws -> Int {
    lock.lock()
    defer { lock.unlock() }
    return try value.get()
  }
}
