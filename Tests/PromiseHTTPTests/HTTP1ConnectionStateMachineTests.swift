import Foundation
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// An action of the machine as the tests compare it: body bytes copied out of the buffer they
/// point into, errors reduced to their code and text.
private enum Step: Equatable {
  case write(String)
  case sendBody
  case read
  case head(Int, HTTP1BodyFraming?)
  case body(String)
  case finish(keep: Bool, keepFor: TimeInterval?)
  case retry(URLError.Code, String?)
  case fail(URLError.Code, String?)
  case close

  init(_ action: HTTP1ConnectionStateMachine.Action) {
    switch action {
    case .write(let bytes): self = .write(String(decoding: bytes, as: UTF8.self))
    case .sendBody: self = .sendBody
    case .read: self = .read
    case .deliverHead(let head, let framing): self = .head(head.statusCode, try? framing.get())
    case .deliverBody(let bytes): self = .body(String(decoding: bytes, as: UTF8.self))
    case .finish(let keep, let keepFor): self = .finish(keep: keep, keepFor: keepFor)
    case .retry(let error): self = .retry(error.code, Step.message(error))
    case .fail(let error): self = .fail(error.code, Step.message(error))
    case .close: self = .close
    }
  }

  static func message(_ error: URLError) -> String? {
    error.userInfo[NSLocalizedDescriptionKey] as? String
  }

  /// Whether the exchange goes on after this step (the driver calls `bytesRead` again).
  var continues: Bool {
    switch self {
    case .head(_, let framing): framing != nil
    case .body: true
    default: false
    }
  }
}

/// The machine fed as `SocketTask` feeds it, with bytes instead of a socket.
private struct Wire {
  var machine = HTTP1ConnectionStateMachine()
  /// The bytes read and not consumed yet.
  var pending: [UInt8] = []

  /// Starts an exchange and sends its request whole; returns the steps up to the first read.
  @discardableResult
  mutating func send(
    method: String = "GET", bodyFraming: HTTP1BodyFraming = .length(0), closes: Bool = false,
    repeatable: Bool = true, bodyBytes: Int64 = 0
  ) -> [Step] {
    pending = []
    let request = HTTP1ConnectionStateMachine.Request(
      head: Array("\(method) / HTTP/1.1\r\n\r\n".utf8), method: method, bodyFraming: bodyFraming,
      closesConnection: closes, isRepeatable: repeatable)
    var steps = [Step(machine.start(request))]
    steps.append(Step(machine.headWritten()))
    machine.bodyBytesWritten(bodyBytes)
    steps.append(Step(machine.bodySent()))
    return steps
  }

  /// Feeds `pieces` as successive reads; each piece is fed only when the machine asks to read.
  /// With `stoppingAtHead`, stops after the final head, as a driver that drops the body does.
  mutating func feed(_ pieces: [[UInt8]], stoppingAtHead: Bool = false) -> [Step] {
    var steps: [Step] = []
    for piece in pieces {
      pending += piece
      while true {
        let (step, consumed) = pending.withUnsafeBytes { bytes in
          let (action, consumed) = machine.bytesRead(bytes)
          return (Step(action), consumed)
        }
        pending.removeFirst(consumed)
        if step == .read { break }
        steps.append(step)
        if !step.continues { return steps }
        if stoppingAtHead, case .head = step { return steps }
      }
    }
    return steps
  }

  /// Feeds `text` as one read.
  mutating func feed(_ text: String, stoppingAtHead: Bool = false) -> [Step] {
    feed([Array(text.utf8)], stoppingAtHead: stoppingAtHead)
  }

  /// Feeds `text` one byte per read.
  mutating func feedByBytes(_ text: String) -> [Step] {
    feed(Array(text.utf8).map { [$0] })
  }
}

/// What an exchange delivered, whatever the pieces its bytes came in: the head, the body
/// joined, and how it ended.
private struct Outcome: Equatable {
  var head: Step?
  var body = ""
  var end: Step?

  init(_ steps: [Step]) {
    for step in steps {
      switch step {
      case .head: head = step
      case .body(let text): body += text
      default: end = step
      }
    }
  }
}

@Suite("HTTP1ConnectionStateMachine")
struct HTTP1ConnectionStateMachineTests {
  static let lengthResponse = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
  static let chunkedResponse =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;name=value\r\n world\r\n"
    + "0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n"
  static let interimResponse =
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + lengthResponse

  @Test func anExchangeSendsItsHeadThenItsBodyThenReads() {
    var wire = Wire()
    #expect(wire.send() == [.write("GET / HTTP/1.1\r\n\r\n"), .sendBody, .read])
    #expect(wire.machine.state == .readingHead)
  }

  @Test func aBodyWithALengthIsDeliveredAndTheConnectionKept() {
    var wire = Wire()
    wire.send()
    #expect(
      wire.feed(Self.lengthResponse) == [
        .head(200, .length(5)), .body("hello"), .finish(keep: true, keepFor: nil),
      ])
    #expect(wire.machine.state == .idle)
    #expect(wire.machine.isReused)
  }

  @Test func aChunkedBodyIsDechunkedAndItsTrailersSkipped() {
    var wire = Wire()
    wire.send()
    #expect(
      wire.feed(Self.chunkedResponse) == [
        .head(200, .chunked), .body("hello"), .body(" world"), .finish(keep: true, keepFor: nil),
      ])
  }

  @Test(arguments: [lengthResponse, chunkedResponse, interimResponse])
  func aResponseSplitAtAnyByteGivesTheSameOutcome(_ response: String) {
    var whole = Wire()
    whole.send()
    let expected = Outcome(whole.feed(response))
    #expect(expected.end == .finish(keep: true, keepFor: nil))
    let bytes = Array(response.utf8)
    for split in 1..<bytes.count {
      var wire = Wire()
      wire.send()
      let outcome = Outcome(wire.feed([Array(bytes[..<split]), Array(bytes[split...])]))
      #expect(outcome == expected, "split at \(split)")
    }
    var byBytes = Wire()
    byBytes.send()
    #expect(Outcome(byBytes.feedByBytes(response)) == expected)
  }

  @Test func interimResponsesAreSkippedBeforeTheFinalOne() {
    var wire = Wire()
    wire.send()
    #expect(
      wire.feed(Self.interimResponse) == [
        .head(200, .length(5)), .body("hello"), .finish(keep: true, keepFor: nil),
      ]
    )
  }

  @Test func moreThanSixteenInterimResponsesAreRefused() {
    let interim = String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 16)
    var sixteen = Wire()
    sixteen.send()
    #expect(Outcome(sixteen.feed(interim + Self.lengthResponse)).end == .finish(keep: true, keepFor: nil))
    var seventeen = Wire()
    seventeen.send()
    #expect(
      seventeen.feed(interim + "HTTP/1.1 100 Continue\r\n\r\n" + Self.lengthResponse) == [
        .fail(.cannotParseResponse, "More than 16 interim (1xx) responses")
      ])
  }

  @Test func switchingProtocolsIsRefused() {
    var wire = Wire()
    wire.send()
    #expect(
      wire.feed("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n") == [
        .fail(.cannotParseResponse, nil)
      ])
    #expect(wire.machine.state == .closed)
  }

  @Test func anAnswerThatIsNotHTTPIsRefusedAfterFiveBytes() {
    var wire = Wire()
    wire.send()
    #expect(wire.feed("SSH-") == [])
    #expect(
      wire.feed("2") == [
        .fail(
          .cannotParseResponse,
          "Received something that is not an HTTP response (the server did not answer in HTTP)")
      ])
  }

  @Test func aHeadLongerThanTheLimitIsRefusedWhetherItEndedOrNot() {
    let long = "HTTP/1.1 200 OK\r\nX-Long: " + String(repeating: "a", count: HTTP1ResponseHead.maximumSize)
    let refusal = Step.fail(
      .cannotParseResponse, "The response head is longer than \(HTTP1ResponseHead.maximumSize) bytes")
    var unended = Wire()
    unended.send()
    #expect(unended.feed(long) == [refusal])
    var ended = Wire()
    ended.send()
    #expect(ended.feed(long + "\r\n\r\n") == [refusal])
  }

  @Test func aNewConnectionThatClosesBeforeAnyByteIsAnEmptyReply() {
    var wire = Wire()
    wire.send()
    #expect(Step(wire.machine.peerClosed()) == .fail(.networkConnectionLost, "Empty reply from server"))
  }

  @Test func aKeptConnectionThatClosesOrResetsBeforeAnyByteIsStale() {
    var closed = Wire()
    closed.send()
    _ = closed.feed(Self.lengthResponse)
    closed.send()
    #expect(Step(closed.machine.peerClosed()) == .retry(.networkConnectionLost, "Empty reply from server"))
    #expect(closed.machine.state == .closed)

    var reset = Wire()
    reset.send()
    _ = reset.feed(Self.lengthResponse)
    reset.send()
    let error = URLError(
      .networkConnectionLost, userInfo: [NSLocalizedDescriptionKey: "Recv failure: Connection reset by peer"])
    #expect(
      Step(reset.machine.readFailed(error))
        == .retry(.networkConnectionLost, "Recv failure: Connection reset by peer"))
  }

  @Test func aKeptConnectionThatFailsTheHeadsSendIsStale() {
    var wire = Wire()
    wire.send()
    _ = wire.feed(Self.lengthResponse)
    let request = HTTP1ConnectionStateMachine.Request(
      head: [], method: "GET", bodyFraming: .length(0), closesConnection: false, isRepeatable: true)
    _ = wire.machine.start(request)
    let lost = URLError(.networkConnectionLost)
    #expect(Step(wire.machine.writeFailed(lost)) == .retry(.networkConnectionLost, nil))

    var new = HTTP1ConnectionStateMachine()
    _ = new.start(request)
    #expect(Step(new.writeFailed(lost)) == .fail(.networkConnectionLost, nil))
  }

  @Test func aRequestWhoseBodyWentOutIsRepeatedOnlyIfRepeatable() {
    var wire = Wire()
    wire.send()
    _ = wire.feed(Self.lengthResponse)
    wire.send(method: "POST", bodyFraming: .length(4), repeatable: false, bodyBytes: 4)
    #expect(Step(wire.machine.peerClosed()) == .fail(.networkConnectionLost, "Empty reply from server"))

    var put = Wire()
    put.send()
    _ = put.feed(Self.lengthResponse)
    put.send(method: "PUT", bodyFraming: .length(4), repeatable: true, bodyBytes: 4)
    #expect(Step(put.machine.peerClosed()) == .retry(.networkConnectionLost, "Empty reply from server"))
  }

  @Test func aKeptConnectionThatSentPartOfAnAnswerIsNotStale() {
    var wire = Wire()
    wire.send()
    _ = wire.feed(Self.lengthResponse)
    wire.send()
    #expect(wire.feed("HTTP/1.1 2") == [])
    #expect(
      Step(wire.machine.peerClosed())
        == .fail(.cannotParseResponse, "The connection closed in the middle of the response head"))
  }

  @Test func theStreamEndingInTheBodyFailsTheExchange() {
    var length = Wire()
    length.send()
    #expect(
      length.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd") == [
        .head(200, .length(10)), .body("abcd"),
      ])
    #expect(
      Step(length.machine.peerClosed())
        == .fail(.networkConnectionLost, "transfer closed with 6 bytes remaining to read"))

    var chunked = Wire()
    chunked.send()
    #expect(
      chunked.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab") == [
        .head(200, .chunked), .body("ab"),
      ])
    #expect(
      Step(chunked.machine.peerClosed())
        == .fail(.networkConnectionLost, "transfer closed with outstanding read data remaining"))
  }

  @Test func aBodyWithoutLengthEndsWithTheStreamAndTheConnection() {
    var wire = Wire()
    wire.send()
    #expect(wire.feed("HTTP/1.1 200 OK\r\n\r\nsome") == [.head(200, .untilClose), .body("some")])
    #expect(wire.feed(" more") == [.body(" more")])
    #expect(Step(wire.machine.peerClosed()) == .finish(keep: false, keepFor: nil))
    #expect(wire.machine.state == .closed)
  }

  @Test func bytesAfterTheBodyEndTheConnection() {
    var wire = Wire()
    wire.send()
    #expect(
      wire.feed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n") == [
        .head(200, .length(2)), .body("ok"), .finish(keep: false, keepFor: nil),
      ])
    #expect(wire.machine.state == .closed)

    var chunked = Wire()
    chunked.send()
    #expect(
      Outcome(chunked.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nextra")).end
        == .finish(keep: false, keepFor: nil))
  }

  @Test func connectionCloseFromEitherSideEndsTheConnection() {
    var server = Wire()
    server.send()
    #expect(
      Outcome(server.feed("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")).end
        == .finish(keep: false, keepFor: nil))
    var client = Wire()
    client.send(closes: true)
    #expect(Outcome(client.feed(Self.lengthResponse)).end == .finish(keep: false, keepFor: nil))
  }

  @Test func anHTTP10ResponseKeepsTheConnectionOnlyWhenItSaysKeepAlive() {
    var plain = Wire()
    plain.send()
    #expect(
      Outcome(plain.feed("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")).end
        == .finish(keep: false, keepFor: nil))
    var keepAlive = Wire()
    keepAlive.send()
    #expect(
      Outcome(keepAlive.feed("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok")).end
        == .finish(keep: true, keepFor: nil))
  }

  @Test func theKeepAliveTimeoutIsKeptLessASecond() {
    var wire = Wire()
    wire.send()
    #expect(
      Outcome(wire.feed("HTTP/1.1 200 OK\r\nKeep-Alive: max=100, timeout=5\r\nContent-Length: 0\r\n\r\n")).end
        == .finish(keep: true, keepFor: 4))
    var one = Wire()
    one.send()
    #expect(
      Outcome(one.feed("HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1\r\nContent-Length: 0\r\n\r\n")).end
        == .finish(keep: true, keepFor: 0))
  }

  @Test(arguments: [("HEAD", 200), ("GET", 204), ("GET", 304)])
  func aResponseWithoutBodyIgnoresItsContentLength(_ method: String, _ status: Int) {
    var wire = Wire()
    wire.send(method: method)
    #expect(
      wire.feed("HTTP/1.1 \(status) X\r\nContent-Length: 5\r\n\r\n") == [
        .head(status, HTTP1BodyFraming.none), .finish(keep: true, keepFor: nil),
      ])
  }

  @Test func aBodyThatCannotBeFramedFailsAfterItsHead() {
    var wire = Wire()
    wire.send()
    let steps = wire.feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n")
    #expect(steps == [.head(200, nil)])
    #expect(wire.machine.state == .closed)
  }

  @Test func cancellingMidBodyFailsTheExchangeAndTheConnection() {
    var wire = Wire()
    wire.send()
    #expect(
      wire.feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd") == [
        .head(200, .length(10)), .body("abcd"),
      ])
    #expect(Step(wire.machine.cancel()) == .fail(.cancelled, nil))
    #expect(wire.machine.state == .closed)
  }

  @Test func anAbandonedBodyKeepsTheConnectionOnlyWhenThereIsNone() {
    var empty = Wire()
    empty.send()
    let found = "HTTP/1.1 302 Found\r\nLocation: /b\r\nContent-Length: 0\r\n\r\n"
    #expect(empty.feed(found, stoppingAtHead: true) == [.head(302, .length(0))])
    #expect(Step(empty.machine.abandonBody()) == .finish(keep: true, keepFor: nil))

    var full = Wire()
    full.send()
    _ = full.feed("HTTP/1.1 302 Found\r\nLocation: /b\r\nContent-Length: 4\r\n\r\nmove", stoppingAtHead: true)
    #expect(Step(full.machine.abandonBody()) == .finish(keep: false, keepFor: nil))
  }

  @Test func aBodySendCutShortStillReadsTheAnswerButEndsTheConnection() {
    var answered = Wire()
    let request = HTTP1ConnectionStateMachine.Request(
      head: [], method: "POST", bodyFraming: .length(100), closesConnection: false, isRepeatable: false)
    _ = answered.machine.start(request)
    _ = answered.machine.headWritten()
    let cut = URLError(
      .networkConnectionLost,
      userInfo: [NSLocalizedDescriptionKey: "The server answered before the whole body was sent"])
    #expect(Step(answered.machine.writeFailed(cut)) == .read)
    #expect(
      answered.feed("HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\n\r\n") == [
        .head(413, .length(0)), .finish(keep: false, keepFor: nil),
      ])

    var silent = HTTP1ConnectionStateMachine()
    _ = silent.start(request)
    _ = silent.headWritten()
    _ = silent.writeFailed(cut)
    #expect(Step(silent.peerClosed()) == .fail(.networkConnectionLost, "Empty reply from server"))
  }

  @Test func twoExchangesShareOneMachine() {
    var wire = Wire()
    wire.send()
    #expect(Outcome(wire.feed(Self.chunkedResponse)).end == .finish(keep: true, keepFor: nil))
    #expect(wire.send() == [.write("GET / HTTP/1.1\r\n\r\n"), .sendBody, .read])
    #expect(
      wire.feedByBytes("HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nnew").first == .head(201, .length(3))
    )
    #expect(wire.machine.state == .idle)
  }

  @Test func anIdleConnectionThatEndsOrSpeaksIsClosed() {
    var ended = HTTP1ConnectionStateMachine()
    #expect(Step(ended.peerClosed()) == .close)
    var spoken = Wire()
    #expect(spoken.feed("HTTP/1.1 200 OK\r\n") == [.close])
    #expect(spoken.machine.state == .closed)
  }
}
