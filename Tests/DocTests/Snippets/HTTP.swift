// The imports Docs/HTTP.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.http-imports
import Dispatch
import Foundation
import PromiseHTTP
import Promises
// snippet.hide
import Testing

// snippet.show

#if canImport(FoundationNetworking)
  import FoundationNetworking  // URLRequest, on Linux
#endif
// snippet.end

// snippet.http-types
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
}

/// The recorder's state belongs to its queue: configure and start it there.
final class StreamRecorder: @unchecked Sendable {
  // Safety: `config` and `isRecording` are only accessed on `queue`.
  let queue = DispatchQueue(label: "recorder")
  private(set) var config: StreamConfig?
  private(set) var isRecording = false

  func apply(_ config: StreamConfig) {
    dispatchPrecondition(condition: .onQueue(queue))
    self.config = config
  }

  func start() {
    dispatchPrecondition(condition: .onQueue(queue))
    isRecording = config != nil
  }
}
// snippet.end

@Suite("Docs/HTTP.md", .timeLimit(.minutes(1)))
struct HTTPExamples {
  @Test func theStory() async throws {
    // snippet.http-story
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let configServer = server.baseURL
    let recorder = StreamRecorder()
    // snippet.show
    let client = HTTPClient(baseURL: configServer)

    let recording = client.post("device/register", json: Registration(deviceID: "A1B2"))
      .decode(Token.self)
      .then { token in client.get("stream/config", headers: ["Authorization": "Bearer \(token.value)"]) }
      .decode(StreamConfig.self)
      .done(on: recorder.queue) { config in
        recorder.apply(config)  // configured before recording starts
        recorder.start()
      }
      .catch { error in print("cannot record: \(error)") }
    // snippet.hide
    try await recording.value
    #expect(recorder.queue.sync { recorder.isRecording })
    #expect(output.lines.isEmpty)
    await server.stop()
    // snippet.end
  }

  @Test func queryAndUserAgent() async throws {
    // snippet.http-query
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let configServer = server.baseURL
    // snippet.show
    let client = HTTPClient(
      baseURL: configServer, configuration: .init(defaultHeaders: ["User-Agent": "Recorder/1.0"]))

    let response = try await client.get(
      "stream/config", query: [URLQueryItem(name: "device", value: "A1B2 (front)")],
      headers: ["Authorization": "Bearer tok-42"]
    ).value
    print(response.url.query ?? "")  // prints "device=A1B2%20%28front%29"
    // snippet.hide
    #expect(output.lines == ["device=A1B2%20%28front%29"])
    let sent = try #require(server.requests.last)
    #expect(sent.path == "/stream/config" && sent.query == "device=A1B2%20%28front%29")
    #expect(sent.header("User-Agent") == "Recorder/1.0")
    await server.stop()
    // snippet.end
  }

  @Test func transportError() async throws {
    // snippet.http-transport-error
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let down = try RefusingServer()
    let configServer = down.baseURL
    // snippet.show
    let client = HTTPClient(baseURL: configServer, configuration: .init(retryPolicy: .none))
    do {
      _ = try await client.get("stream/config").value
    } catch HTTPError.transport(let urlError, let url) {
      // urlError: the URLError behind it (its code); url: the request's URL, if known
      if urlError.code == .cannotConnectToHost {
        print("server down: \(url?.path ?? "?")")  // prints "server down: /stream/config"
      }
    }
    // snippet.hide
    #expect(output.lines == ["server down: /stream/config"])
    // snippet.end
  }

  @Test func unacceptableStatus() async throws {
    // snippet.http-status
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let client = HTTPClient(baseURL: server.baseURL)
    // snippet.show
    do {
      _ = try await client.get("stream/config").value  // no token
    } catch let error as HTTPError {
      print(error.statusCode ?? 0)  // prints "401"
    }
    // snippet.hide
    #expect(output.lines == ["401"])
    await server.stop()
    // snippet.end
  }

  @Test func validateContentType() async throws {
    // snippet.http-validate
    // snippet.hide
    let server = try DocServer.start()
    let client = HTTPClient(baseURL: server.baseURL)
    // snippet.show
    let token = client.post("device/register", json: Registration(deviceID: "A1B2"))
      .validate(statusCodes: 200..<201)
      .validate(contentTypes: ["application/json"])
      .decode(Token.self)
    // snippet.hide
    #expect(try await token.value.value == "tok-42")
    await server.stop()
    // snippet.end
  }

  @Test func decodingError() async throws {
    // snippet.http-decoding
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let client = HTTPClient(baseURL: server.baseURL)
    // snippet.show
    do {
      _ = try await client.get("stream/config-v0").decode(StreamConfig.self).value
    } catch HTTPError.decoding(let type, let codingPath, _, _, let url) {
      print("\(type) at \(codingPath) from \(url.path)")
      // prints "StreamConfig at bitrateKbps from /stream/config-v0"
    }
    // snippet.hide
    #expect(output.lines == ["StreamConfig at bitrateKbps from /stream/config-v0"])
    await server.stop()
    // snippet.end
  }

  @Test func retries() async throws {
    // snippet.http-retry
    // snippet.hide
    let server = try DocServer.start()
    let configServer = server.baseURL
    // snippet.show
    let patient = HTTPClient(
      baseURL: configServer, configuration: .init(retryPolicy: RetryPolicy(maximumAttempts: 4)))

    let config = try await patient.get("busy/config").decode(StreamConfig.self).value
    // the first attempt got "503 Service Unavailable, Retry-After: 0"; the second succeeded
    // snippet.hide
    #expect(config.bitrateKbps == 2_500)
    #expect(server.requests.filter { $0.path == "/busy/config" }.count == 2)
    await server.stop()
    // snippet.end
  }

  @Test func backoffWithoutJitter() {
    // snippet.http-retry-backoff
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let steady = RetryPolicy(
      maximumAttempts: 4,
      backoff: .exponential(initial: .milliseconds(100), maximum: .seconds(2), jitter: .none))

    print(steady.delay(beforeRetry: 1)!)  // prints "0.1 seconds"
    print(steady.delay(beforeRetry: 3)!)  // prints "0.4 seconds"
    print(steady.delay(beforeRetry: 4) == nil)  // prints "true": 4 attempts, 3 retries
    // snippet.hide
    #expect(output.lines == ["0.1 seconds", "0.4 seconds", "true"])
    #expect(steady.delay(beforeRetry: 2) == .milliseconds(200))
    // snippet.end
  }

  @Test func clientTimeout() async throws {
    // snippet.http-timeout
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let configServer = server.baseURL
    // snippet.show
    let impatient = HTTPClient(baseURL: configServer, configuration: .init(timeout: .milliseconds(300)))
    do {
      _ = try await impatient.get("slow/config").value
    } catch HTTPError.timedOut(_, let limit) {
      print("no answer within \(limit)")  // prints "no answer within 0.3 seconds"
    }
    // snippet.hide
    #expect(output.lines == ["no answer within 0.3 seconds"])
    await server.stop()
    // snippet.end
  }

  @Test func deadlines() async throws {
    // snippet.http-deadline
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let client = HTTPClient(baseURL: server.baseURL)
    // snippet.show
    let deadline = Deadline.after(.milliseconds(500))  // for the whole chain

    let config = client.post("device/register", json: Registration(deviceID: "A1B2"), deadline: deadline)
      .decode(Token.self)
      .then { token in
        client.get("slow/config", headers: ["Authorization": "Bearer \(token.value)"], deadline: deadline)
      }
      .decode(StreamConfig.self)

    do {
      _ = try await config.value
    } catch HTTPError.timedOut {
      print("no config within 500 ms")  // prints "no config within 500 ms"
    }
    // snippet.hide
    #expect(output.lines == ["no config within 500 ms"])
    await server.stop()
    // snippet.end
  }

  @Test func queueing() async throws {
    // snippet.http-queue
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let configServer = server.baseURL
    // snippet.show
    let client = HTTPClient(
      baseURL: configServer,
      configuration: .init(maximumConcurrentRequestsPerHost: 1, maximumQueueWait: .milliseconds(200)))

    let slow = client.get("slow/config")  // takes the only place for this origin
    do {
      _ = try await client.get("stream/config").value
    } catch HTTPError.queueWaitExceeded(let limit, _) {
      print("never sent: waited \(limit)")  // prints "never sent: waited 0.2 seconds"
    }
    slow.cancel()
    // snippet.hide
    #expect(output.lines == ["never sent: waited 0.2 seconds"])
    #expect(!server.requests.contains { $0.path == "/stream/config" })
    await server.stop()
    // snippet.end
  }

  @Test func urlSessionEngine() async throws {
    // snippet.http-engine
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let configServer = server.baseURL
    // snippet.show
    var configuration = HTTPClient.Configuration()
    configuration.engine = .urlSession  // every request of this client through its URLSession
    let client = HTTPClient(baseURL: configServer, configuration: configuration)

    let config = try await client.get("stream/config", headers: ["Authorization": "Bearer tok-42"])
      .decode(StreamConfig.self).value
    print(config.bitrateKbps)  // prints "2500"
    // snippet.hide
    #expect(output.lines == ["2500"])
    // Through URLSession: FoundationNetworking's User-Agent (libcurl's), not the socket
    // transport's `PromiseHTTP` (the Transfers snippet `userAgents` shows both).
    let sent = try #require(server.requests.last)
    #if canImport(FoundationNetworking)
      #expect(sent.header("User-Agent")?.contains("curl/") == true, "\(sent.header("User-Agent") ?? "none")")
    #endif
    #expect(sent.header("User-Agent") != "PromiseHTTP")
    await server.stop()
    // snippet.end
  }

  @Test func clientCertificate() throws {
    // snippet.http-client-certificate
    // snippet.hide
    // The files a device would have; their PEM is checked on the first HTTPS request, which
    // this snippet does not make (ClientCertificateTests and NginxTests do, against servers
    // that ask for a certificate).
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
      "DocTests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let certificateFile = folder.appendingPathComponent("device.pem")
    let keyFile = folder.appendingPathComponent("device.key")
    try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: certificateFile)
    try Data("-----BEGIN PRIVATE KEY-----\n".utf8).write(to: keyFile)
    let devicesServer = URL(string: "https://devices.example.com/")!
    // snippet.show
    var configuration = HTTPClient.Configuration()
    configuration.clientCertificate = HTTPClient.ClientCertificate(
      certificateChain: try Data(contentsOf: certificateFile),  // the certificate, then intermediates
      privateKey: try Data(contentsOf: keyFile))  // its private key, unencrypted
    let devices = HTTPClient(baseURL: devicesServer, configuration: configuration)
    // snippet.hide
    #expect(devices.configuration.clientCertificate?.privateKey == (try Data(contentsOf: keyFile)))
    #expect(
      devices.configuration.clientCertificate?.certificateChain == (try Data(contentsOf: certificateFile)))
    // snippet.end
  }

  @Test func authenticator() async throws {
    // snippet.http-authenticator
    // snippet.hide
    let server = try DocServer.start()
    let configServer = server.baseURL
    // snippet.show
    let tokens = HTTPClient(baseURL: configServer)
    let authenticator = TokenAuthenticator {
      tokens.post("device/register", json: Registration(deviceID: "A1B2"))
        .decode(Token.self)
        .map { token in token.value }
    }
    let api = HTTPClient(baseURL: configServer, configuration: .init(authenticator: authenticator))

    let config = try await api.get("stream/config").decode(StreamConfig.self).value
    // snippet.hide
    #expect(config.ingestURL == "rtmp://media.example.com/live/A1B2")
    await server.stop()
    // snippet.end
  }

  @Test func steps() async throws {
    // snippet.http-steps
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let configServer = server.baseURL
    // snippet.show
    /// Sends the device's ID with every attempt: a step that only adapts the request.
    struct DeviceID: HTTPInterceptor {
      let id: String

      func adapt(_ request: URLRequest, for attempt: HTTPAttempt) -> Promise<URLRequest> {
        var request = request
        request.setValue(id, forHTTPHeaderField: "X-Device-ID")
        return Promise(request)
      }
    }

    let client = HTTPClient(
      baseURL: configServer,
      configuration: .init(
        interceptors: [
          DeviceID(id: "A1B2"),
          HTTPLogger { line in if line.hasPrefix("↻") { print(line) } },
        ]))

    let config = try await client.get("busy/config").decode(StreamConfig.self).value
    // prints "↻ attempt 2 in 0.0 seconds": the retry policy honoured the 503's Retry-After
    // snippet.hide
    #expect(config.bitrateKbps == 2_500)
    #expect(await output.lines(count: 1) == ["↻ attempt 2 in 0.0 seconds"])
    let busy = server.requests.filter { $0.path == "/busy/config" }
    #expect(busy.count == 2 && busy.allSatisfy { $0.header("X-Device-ID") == "A1B2" })
    await server.stop()
    // snippet.end
  }

  @Test func cancellation() async throws {
    // snippet.http-cancel
    // snippet.hide
    let server = try DocServer.start()
    let client = HTTPClient(baseURL: server.baseURL)
    // snippet.show
    let download = client.get("slow/config")
    download.cancel()  // rejects with CancellationError and cancels the request
    // snippet.hide
    await #expect(throws: CancellationError.self) { try await download.value }
    await server.stop()
    // snippet.end
  }

  @Test func credentialsStayHome() async throws {
    // snippet.http-redirect
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let client = HTTPClient(baseURL: server.baseURL)
    // snippet.show
    // "old/config" redirects to another host, which echoes whether a credential arrived.
    let response = try await client.get("old/config", headers: ["Authorization": "Bearer tok-42"]).value
    print(response.text)  // prints "no Authorization header"
    // snippet.hide
    #expect(output.lines == ["no Authorization header"])
    await server.stop()
    // snippet.end
  }
}
