import Foundation
import Promises
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A sink that answers `begin` with a fixed decision and records what it is given.
final class RecordingSink: ResponseBodySink {
  private struct State {
    var written = Data()
    var heads: [Int] = []
  }
  private let state = LockedBox(State())
  let decision: ResponseBodyDecision
  let refuseWrites: HTTPError?

  init(_ decision: ResponseBodyDecision, refuseWrites: HTTPError? = nil) {
    self.decision = decision
    self.refuseWrites = refuseWrites
  }

  var written: Data { state.withLock { $0.written } }

  func prepare(_ request: URLRequest) -> URLRequest { request }

  func begin(_ response: HTTPURLResponse) -> ResponseBodyDecision {
    state.withLock { $0.heads.append(response.statusCode) }
    return decision
  }

  func write(_ data: Data) -> HTTPError? {
    state.withLock { $0.written.append(data) }
    return refuseWrites
  }
}

/// The exchange machine with a body sink: who decides where the body goes, and the size limit.
@Suite("ExchangeStateMachine with a body sink")
struct ExchangeBodySinkTests {
  static let url = URL(string: "http://127.0.0.1:8080/file")!

  static func machine(sink: RecordingSink, method: String = "GET") -> ExchangeMachine {
    var request = URLRequest(url: url)
    request.httpMethod = method
    return ExchangeMachine(
      task: "first",
      settings: ExchangeMachine.Settings(
        request: request, requestURL: url, maximumBodySize: 10, redirectPolicy: .follow(maximum: 5),
        sensitiveHeaders: .defaultSensitive, sensitiveParameters: .defaultSensitive, bodySink: sink),
      completion: { _ in })
  }

  static func head(_ status: Int, length: Int? = nil) -> HTTPURLResponse {
    var fields: [String: String] = [:]
    if let length { fields["Content-Length"] = "\(length)" }
    return HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
  }

  /// Runs `receive` and, when it asks the sink, the sink's answer, as `Exchange.receive` does.
  static func receive(
    _ head: HTTPURLResponse, on machine: inout ExchangeMachine
  ) -> (URLSession.ResponseDisposition, ExchangeMachine.Action) {
    var (disposition, action) = machine.receive(head)
    if case .ask(let sink, let asked) = action {
      #expect(asked === head)
      (disposition, action) = machine.sinkDecided(sink.begin(asked), for: asked)
    }
    return (disposition, action)
  }

  @Test("a consumed body goes to the sink, past the in-memory limit, and the response has no body")
  func consumedBodyBypassesTheLimit() throws {
    let sink = RecordingSink(.consume)
    var machine = Self.machine(sink: sink)
    // Declared 1,000 bytes: ten times the in-memory limit.
    let (disposition, action) = Self.receive(Self.head(200, length: 1_000), on: &machine)
    #expect(disposition == .allow)
    #expect(ExchangeStateMachineTests.isNone(action))
    #expect(machine.consuming)
    for _ in 0..<100 {
      guard case .write(let target, let data) = machine.append(Data(repeating: 7, count: 10)) else {
        Issue.record("a consumed chunk was not handed to the sink")
        return
      }
      #expect(target === sink)
      _ = target.write(data)
    }
    #expect(sink.written.count == 1_000)
    #expect(machine.consumedBytes == 1_000)
    let completed = ExchangeStateMachineTests.finished(machine.complete(error: nil, taskResponse: nil))
    let response = try #require(completed?.0).get()
    #expect(response.statusCode == 200)
    #expect(response.body.isEmpty)
  }

  @Test("a collected body (an error status) keeps the in-memory limit, declared or counted")
  func collectedBodyKeepsTheLimit() {
    var declared = Self.machine(sink: RecordingSink(.collect))
    let (disposition, action) = Self.receive(Self.head(404, length: 11), on: &declared)
    #expect(disposition == .cancel)
    guard case .failure(.tooLarge(limit: 10, _))? = ExchangeStateMachineTests.finished(action)?.0 else {
      Issue.record("a declared length above the limit was not refused: \(action)")
      return
    }

    var counted = Self.machine(sink: RecordingSink(.collect))
    _ = Self.receive(Self.head(404), on: &counted)
    #expect(!counted.consuming)
    #expect(ExchangeStateMachineTests.isNone(counted.append(Data(count: 6))))
    let over = counted.append(Data(count: 6))
    guard case .failure(.tooLarge)? = ExchangeStateMachineTests.finished(over)?.0 else {
      Issue.record("a collected body past the limit was not refused: \(over)")
      return
    }
  }

  @Test(
    "a sink that refuses the head ends the exchange with its error; one that refuses bytes stops the task")
  func sinkFailures() {
    let refusal = HTTPError.invalidRequest("refused by the sink")
    var atHead = Self.machine(sink: RecordingSink(.fail(refusal)))
    let (disposition, action) = Self.receive(Self.head(200), on: &atHead)
    #expect(disposition == .cancel)
    guard
      case .failure(.invalidRequest("refused by the sink"))? = ExchangeStateMachineTests.finished(action)?.0
    else {
      Issue.record("the sink's error was not delivered: \(action)")
      return
    }
    // The head's disposition (`.cancel`) ends the task: it is not cancelled again.
    #expect(ExchangeStateMachineTests.finished(action)?.1 == nil)

    var atWrite = Self.machine(sink: RecordingSink(.consume))
    _ = Self.receive(Self.head(200), on: &atWrite)
    _ = atWrite.append(Data(count: 3))
    let failed = ExchangeStateMachineTests.finished(atWrite.sinkFailed(refusal))
    guard case .failure(.invalidRequest)? = failed?.0 else {
      Issue.record("a write refusal was not delivered")
      return
    }
    #expect(failed?.1 == "first")
    // Nothing more reaches the sink.
    #expect(ExchangeStateMachineTests.isNone(atWrite.append(Data(count: 3))))
  }

  @Test("a cancel while the sink decides wins: the head is refused and nothing is delivered")
  func cancelWhileDeciding() {
    let sink = RecordingSink(.consume)
    var machine = Self.machine(sink: sink)
    let (_, asked) = machine.receive(Self.head(200))
    guard case .ask = asked else {
      Issue.record("the sink was not asked")
      return
    }
    _ = machine.cancel()
    let (disposition, action) = machine.sinkDecided(.consume, for: Self.head(200))
    #expect(disposition == .cancel)
    #expect(ExchangeStateMachineTests.isNone(action))
    #expect(ExchangeStateMachineTests.isNone(machine.append(Data(count: 3))))
  }

  @Test("a HEAD response does not ask the sink")
  func headIsNotAsked() {
    var machine = Self.machine(sink: RecordingSink(.consume), method: "HEAD")
    let (disposition, action) = machine.receive(Self.head(200, length: 1_000))
    #expect(disposition == .allow)
    #expect(ExchangeStateMachineTests.isNone(action))
  }

  @Test(
    "an unknown failure is a lost connection only when fewer bytes than declared went to the sink",
    arguments: [(40, URLError.Code.networkConnectionLost), (100, .unknown)])
  func shortConsumedBodyIsConnectionLost(consumed: Int, expected: URLError.Code) {
    var machine = Self.machine(sink: RecordingSink(.consume))
    _ = Self.receive(Self.head(200, length: 100), on: &machine)
    _ = machine.append(Data(count: consumed))
    let unknown = URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "something else went wrong"])
    let result = ExchangeStateMachineTests.finished(machine.complete(error: unknown, taskResponse: nil))?.0
    guard case .failure(.transport(let error, _))? = result else {
      Issue.record("not a transport failure: \(String(describing: result))")
      return
    }
    #expect(error.code == expected)
  }
}
