import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Makes libcurl bypass any proxy for the loopback origins, once, before the first request
/// (`LoopbackServer.bypassEnvironmentProxy()`).
let loopbackBypassesProxy: Void = LoopbackServer.bypassEnvironmentProxy()

/// A started loopback server with a router; stop it with `stop()` (the helpers do).
struct TestServer {
  let server: LoopbackServer
  let router: Router

  var baseURL: URL { server.baseURL }
  var requests: [RecordedRequest] { server.requests }

  /// Returns a client for this server with test-friendly defaults (no retries unless given).
  ///
  /// The 30 s timeout is a backstop, not a bound a test waits for: under ThreadSanitizer, with
  /// the suites running in parallel on two cores, the whole process was seen to stall for about
  /// 20 s, and a 10 s timeout then ended requests that a test meant to cancel or hold. Tests of
  /// deadlines pass a `VirtualTimeScheduler` and move its clock instead of waiting.
  func client(
    retryPolicy: RetryPolicy = .none, timeout: Duration = .seconds(30), maximumResponseSize: Int = 1 << 20,
    redirectPolicy: RedirectPolicy = .default,
    sensitiveHeaders: Set<String> = HTTPClient.defaultSensitiveHeaders,
    acceptableStatusCodes: Range<Int> = 200..<300, defaultHeaders: HTTPHeaders = [:],
    authenticator: TokenAuthenticator? = nil, interceptors: [any HTTPInterceptor] = [],
    scheduler: any PromiseScheduler = PromiseSchedulers.default,
    sessionConfiguration: URLSessionConfiguration = HTTPClient.makeDefaultConfiguration(),
    engine: HTTPClient.Engine = defaultTestEngine
  ) -> HTTPClient {
    var configuration = HTTPClient.Configuration(
      sessionConfiguration: sessionConfiguration, defaultHeaders: defaultHeaders, retryPolicy: retryPolicy,
      timeout: timeout, maximumResponseSize: maximumResponseSize, redirectPolicy: redirectPolicy,
      sensitiveHeaders: sensitiveHeaders, acceptableStatusCodes: acceptableStatusCodes,
      authenticator: authenticator, interceptors: interceptors, scheduler: scheduler)
    configuration.engine = engine
    return HTTPClient(baseURL: baseURL, configuration: configuration)
  }
}

/// The engine of a test's client when the test names none: `.automatic` (on Linux the socket
/// transport), or `.urlSession` when the environment says `PROMISEHTTP_ENGINE=urlSession`. CI
/// runs the HTTP tests both ways, so that a test written once covers both engines; a test of
/// one engine's own behaviour names it.
let defaultTestEngine: HTTPClient.Engine =
  ProcessInfo.processInfo.environment["PROMISEHTTP_ENGINE"] == "urlSession" ? .urlSession : .automatic

/// Whether a download to the loopback server goes over the socket transport under `.automatic`:
/// not when the environment names a proxy for plain HTTP, which libcurl would use (see
/// `HTTPClient.Engine.automatic`).
let socketTransportServesLoopback = !["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"].contains {
  ProcessInfo.processInfo.environment[$0]?.isEmpty == false
}

/// Checks that every one of `requests` (at least one) came over `transport`, by the
/// `User-Agent` sent when the request sets none: the socket transport's `PromiseHTTP`, or
/// FoundationNetworking's `<process> (unknown version) curl/<version>`.
func expectSent(
  over transport: HTTPClient.Engine, _ requests: [RecordedRequest],
  sourceLocation: SourceLocation = #_sourceLocation
) {
  #expect(!requests.isEmpty, "no request arrived", sourceLocation: sourceLocation)
  for request in requests {
    expectUserAgent(request.header("User-Agent"), of: transport, request.path, sourceLocation: sourceLocation)
  }
}

/// Checks that `agent`, the `User-Agent` a request arrived with when it set none, is the one
/// `transport` sends (see `expectSent(over:_:)`); `what` names the request in the message.
func expectUserAgent(
  _ agent: String?, of transport: HTTPClient.Engine, _ what: String,
  sourceLocation: SourceLocation = #_sourceLocation
) {
  let agent = agent ?? ""
  if transport == .automatic && socketTransportServesLoopback {
    #expect(agent == "PromiseHTTP", "\(what)", sourceLocation: sourceLocation)
  } else {
    #expect(agent.contains("(unknown version) curl/"), "\(what): \(agent)", sourceLocation: sourceLocation)
  }
}

/// Starts a server whose routes `configure` registers, runs `body`, and stops the server.
func withServer<T>(
  _ configure: (Router) -> Void, _ body: (TestServer) async throws -> T
) async throws -> T {
  _ = loopbackBypassesProxy
  let router = Router()
  configure(router)
  let server = try LoopbackServer(router: router)
  do {
    let result = try await body(TestServer(server: server, router: router))
    await offThePool { server.stop() }
    return result
  } catch {
    await offThePool { server.stop() }
    throw error
  }
}

/// Runs blocking work (the server's `stop()` waits for its threads) on a thread of its own.
///
/// Swift's cooperative pool has one thread per core (two here); blocking them would stall every
/// test running in parallel and skew the elapsed times the deadline tests check. A fresh serial
/// queue gets an overcommit thread, so the blocked work does not starve `DispatchQueue.global()`
/// either (where the clients' timers and callbacks run).
func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    DispatchQueue(label: "PromiseHTTPTests.blocking").async { continuation.resume(returning: work()) }
  }
}

extension TestServer {
  /// Waits (at most 5 s, off the cooperative pool) until `count` requests have arrived.
  func arrived(_ count: Int) async -> Bool {
    let server = self.server
    // Generous: under ThreadSanitizer on a loaded 2-core machine a first request has been seen
    // to take over 5 s to arrive. The suites' time limit still bounds the whole test.
    return await offThePool { server.waitForRequests(count: count, timeout: .seconds(30)) != nil }
  }
}

/// The instant a promise settled, recorded on a Dispatch queue by `outcome(of:)`.
private final class SettledAt: @unchecked Sendable {
  // Safety: `instant` is read and written only while `lock` is held.
  private let lock = NSLock()
  private var instant: ContinuousClock.Instant?

  func mark() {
    lock.lock()
    instant = .now
    lock.unlock()
  }

  var value: ContinuousClock.Instant? {
    lock.lock()
    defer { lock.unlock() }
    return instant
  }
}

/// A retry policy with tiny, deterministic backoffs, so retry tests take milliseconds.
func quickRetries(_ attempts: Int = 3) -> RetryPolicy {
  RetryPolicy(
    maximumAttempts: attempts, backoff: .exponential(initial: .milliseconds(5), maximum: .milliseconds(20)))
}

/// Awaits `promise` and returns its outcome and the time from `start` to its settlement.
///
/// The settlement instant is taken on a Dispatch queue as the promise settles, so the elapsed
/// time measures the client, not how soon the test's task got a thread back.
func outcome<T>(
  of promise: Promise<T>, since start: ContinuousClock.Instant = .now
) async -> (result: Result<T, any Error>, elapsed: Duration) {
  let settled = SettledAt()
  let observed = promise.whenSettled(on: .global()) { _ in settled.mark() }
  let result: Result<T, any Error>
  do {
    result = .success(try await observed.value)
  } catch {
    result = .failure(error)
  }
  return (result, (settled.value ?? .now) - start)
}

/// Returns the `HTTPError` of a rejected outcome, recording a test issue otherwise.
func httpError<T>(
  _ result: Result<T, any Error>, sourceLocation: SourceLocation = #_sourceLocation
) -> HTTPError? {
  switch result {
  case .success(let value):
    Issue.record("expected an HTTPError, got the value \(value)", sourceLocation: sourceLocation)
    return nil
  case .failure(let error as HTTPError):
    return error
  case .failure(let error):
    Issue.record("expected an HTTPError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
    return nil
  }
}

/// Prints one line of the fault table: scenario, outcome, elapsed milliseconds.
func report(_ scenario: String, _ result: Result<some Any, any Error>, _ elapsed: Duration) {
  let what: String
  switch result {
  case .success: what = "fulfilled"
  case .failure(let error as HTTPError): what = "\(error.caseName): \(error)"
  case .failure(let error): what = "\(type(of: error))"
  }
  let milliseconds = Int(
    (Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15))
  print("FAULT | \(scenario) | \(what.prefix(160)) | \(milliseconds) ms")
}

extension HTTPError {
  /// The case's name, for the fault table.
  var caseName: String {
    switch self {
    case .transport(let error, _): "transport(\(error.code.rawValue))"
    case .unacceptableStatus(let status, _, _, _): "unacceptableStatus(\(status))"
    case .decoding: "decoding"
    case .timedOut: "timedOut"
    case .tooLarge: "tooLarge"
    case .invalidRequest: "invalidRequest"
    case .tooManyRedirects: "tooManyRedirects"
    case .queueWaitExceeded: "queueWaitExceeded"
    }
  }
}

/// Waits, polling every 10 ms for at most `limit`, until `condition` holds; returns whether it did.
///
/// For conditions that no callback announces (a server noticing a closed socket).
func eventually(within limit: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
  let end = ContinuousClock.now + limit
  while ContinuousClock.now < end {
    if condition() { return true }
    try? await Task.sleep(for: .milliseconds(10))
  }
  return condition()
}

/// A JSON body of `count` bytes or more.
func largeJSON(bytes count: Int) -> String {
  "{\"padding\":\"" + String(repeating: "x", count: count) + "\"}"
}

/// Whether this process's resident memory says anything about the code under test.
///
/// Only when `PROMISES_MEASURE_MEMORY=1` runs the memory tests alone (`.ci/run` has a step for
/// it): in a whole `swift test` run other suites allocate in the same process at the same time
/// (a measured 80 MiB of growth that was not the server's). Never under a sanitizer
/// (`PROMISES_SANITIZER`): AddressSanitizer keeps freed memory in quarantine and both
/// sanitizers add shadow memory, so resident memory grows with what the code allocates and
/// frees, not with what it keeps.
enum MemoryMeasurement {
  static let isMeaningful =
    ProcessInfo.processInfo.environment["PROMISES_MEASURE_MEMORY"] == "1"
    && ProcessInfo.processInfo.environment["PROMISES_SANITIZER"] == nil
}
