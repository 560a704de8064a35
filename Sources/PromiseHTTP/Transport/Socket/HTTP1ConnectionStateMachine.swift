import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The wire logic of one HTTP/1.1 connection, across the exchanges it carries, as a value:
/// every event returns the one thing its driver does next.
///
/// No socket, no thread, no lock: the driver (`SocketTask`) does the blocking I/O on a
/// `SocketConnection`, feeds what happened back in as an event, and runs the action; the tests
/// (`HTTP1ConnectionStateMachineTests`) feed bytes instead. The machine parses the response
/// head (interim 1xx responses skipped, 101 refused, an answer that is not HTTP refused after
/// five bytes, the head size limit), frames the body (`HTTP1BodyFraming`), removes the chunked
/// coding, decides whether the connection may carry another exchange, and tells a kept-alive
/// connection that the server closed before answering (stale) from a failed exchange.
///
/// Content coding (gzip, deflate, br, zstd) is the driver's: it is a property of the representation,
/// not of the connection, and its decoder is a class around C state that a value machine would
/// only carry along; the machine hands on the body as framed.
///
/// ```
/// idle ─▶ writingHead ─▶ writingBody ─▶ readingHead ─▶ readingBody ─▶ idle (kept)
///   │          │              │              │              │
///   └──────────┴──────────────┴──────────────┴──────────────┴───────▶ closed
/// ```
/// - **idle**: connected, no exchange: a new connection, or one kept after an exchange.
/// - **writingHead**: the driver is sending the request head (`write`).
/// - **writingBody**: the driver is sending the request body (`sendBody`).
/// - **readingHead**: reading the response head; interim responses are read away here.
/// - **readingBody**: the final head was delivered; reading its body to its framed end.
/// - **closed**: the connection carries nothing more.
///
/// The bytes the driver has read and not yet seen consumed are passed to `bytesRead(_:)`, in
/// one piece: the head must be contiguous to be parsed, so a partial head stays unconsumed
/// until the rest arrives; body bytes are consumed as they are handed on, never copied.
struct HTTP1ConnectionStateMachine: Sendable {
  /// Where the connection is in its life (see the type's diagram).
  enum State: Equatable, Sendable {
    case idle
    case writingHead
    case writingBody
    case readingHead
    case readingBody
    case closed
  }

  /// What one exchange sends, as far as the wire is concerned.
  struct Request: Sendable {
    /// The request line and header fields, as sent.
    var head: [UInt8]
    /// The request method: a response to `HEAD` has no body.
    var method: String
    /// How the request body is framed: one sent until the connection closes ends it.
    var bodyFraming: HTTP1BodyFraming
    /// Whether the request asks for the connection to close after it (`Connection: close`).
    var closesConnection: Bool
    /// Whether the request may go again on a new connection after some of its body was sent
    /// (idempotent, with a body it can send again); with none of it sent, it always may.
    var isRepeatable: Bool
  }

  /// The one thing the driver does after an event.
  enum Action {
    /// Sends these bytes (the request head), then reports `headWritten()` or `writeFailed(_:)`.
    case write([UInt8])
    /// Sends the request body, reporting `bodyBytesWritten(_:)` as it goes, then `bodySent()` or
    /// `writeFailed(_:)`.
    case sendBody
    /// Reads more bytes, then reports `bytesRead(_:)` (with the bytes left unconsumed before
    /// them), `peerClosed()` or `readFailed(_:)`.
    case read
    /// Hands on the final response head (the redirect question, cookies, the response), then
    /// goes on with `bytesRead(_:)` with the bytes after it, or drops the body with
    /// `abandonBody()`. A `framing` that failed ends the exchange with its error (the head's
    /// cookies are stored first, as a data task stores them); the machine is closed then.
    case deliverHead(HTTP1ResponseHead, framing: Result<HTTP1BodyFraming, URLError>)
    /// Hands on these bytes of the body (a slice of the bytes of the last `bytesRead(_:)`, valid
    /// until the driver reuses its buffer), then goes on with `bytesRead(_:)`.
    case deliverBody(UnsafeRawBufferPointer)
    /// The exchange is done. With `keep`, the connection may carry another exchange (idle), for
    /// at most `keepFor` seconds when the server said how long it keeps it; else close it.
    case finish(keep: Bool, keepFor: TimeInterval?)
    /// A kept-alive connection the server closed before answering (stale): close it; the request
    /// may go again on a new connection, or fail with the error.
    case retry(URLError)
    /// The exchange fails with the error: close the connection.
    case fail(URLError)
    /// An idle connection ended, or read bytes nobody asked for: close it.
    case close
  }

  /// The most interim (1xx) responses read before the final one: a server that sends them
  /// without end would keep the exchange reading, since bytes keep arriving.
  static let maximumInterimResponses = 16

  private(set) var state = State.idle
  /// How many exchanges the connection carried to a kept end: a reused connection may turn out
  /// closed by the server while it was idle.
  private(set) var keptExchanges = 0

  // The current exchange. Stored properties, not payloads of `state`: mutating a payload in
  // place would copy the chunked decoder's line buffer on every read.

  /// The request's method, body framing, `Connection: close` and repeatability.
  private var method = "GET"
  private var requestFraming = HTTP1BodyFraming.none
  private var requestCloses = false
  private var isRepeatable = false
  /// Whether any byte of the request body went out.
  private var sentBodyBytes = false
  /// How sending and reading failed, when both did.
  private var ending = SocketExchangeEnding()
  /// Whether any byte of a response arrived.
  private var receivedAny = false
  /// How many of the unconsumed bytes were searched for the end of the head.
  private var scanned = 0
  /// How many interim responses were read away.
  private var interimResponses = 0
  /// The framing of the body being read, and what is left of it.
  private var framing = HTTP1BodyFraming.none
  private var remaining: Int64 = 0
  private var chunks = HTTP1ChunkedDecoder()
  /// Whether the connection may be kept once the body ends (the response and the request
  /// allow it), and for how long the server said.
  private var keepable = false
  private var keepFor: TimeInterval?
  /// Whether bytes followed the final head in the read that completed it.
  private var bytesAfterHead = false

  /// Creates the machine of a connection just opened.
  init() {}

  /// Whether the connection carried an exchange before: one the server may have closed while
  /// it was idle.
  var isReused: Bool { keptExchanges > 0 }

  // MARK: Events

  /// Starts an exchange on the idle connection: the request's head goes out first.
  mutating func start(_ request: Request) -> Action {
    guard state == .idle else { return unexpected() }
    state = .writingHead
    method = request.method
    requestFraming = request.bodyFraming
    requestCloses = request.closesConnection
    isRepeatable = request.isRepeatable
    sentBodyBytes = false
    ending = SocketExchangeEnding()
    receivedAny = false
    scanned = 0
    interimResponses = 0
    framing = .none
    remaining = 0
    chunks = HTTP1ChunkedDecoder()
    keepable = false
    keepFor = nil
    bytesAfterHead = false
    return .write(request.head)
  }

  /// The request head went out whole.
  mutating func headWritten() -> Action {
    guard state == .writingHead else { return unexpected() }
    state = .writingBody
    return .sendBody
  }

  /// `total` bytes of the request body have gone out so far.
  mutating func bodyBytesWritten(_ total: Int64) {
    if total > 0 { sentBodyBytes = true }
  }

  /// The request body went out whole: the response is read.
  mutating func bodySent() -> Action {
    guard state == .writingBody else { return unexpected() }
    state = .readingHead
    return .read
  }

  /// Sending the head or the body failed with `error`.
  ///
  /// A kept-alive connection closed while idle fails the head's send: the server cannot have
  /// acted on part of a head, so the request may go again. A body whose send the server cut
  /// short may still have an answer (a 413 before the whole upload, say): the response is read,
  /// and an empty reply decides the error (`SocketExchangeEnding`).
  mutating func writeFailed(_ error: URLError) -> Action {
    switch state {
    case .writingHead:
      if isReused, error.code == .networkConnectionLost { return close(.retry(error)) }
      return close(.fail(error))
    case .writingBody:
      guard error.code == .networkConnectionLost else { return close(.fail(error)) }
      ending.sendFailed(error)
      state = .readingHead
      return .read
    default:
      return unexpected()
    }
  }

  /// Bytes arrived, or the driver goes on after an action that delivered some.
  ///
  /// `bytes` are those read and not consumed yet (left over from the last call) followed by the
  /// new ones. The driver drops the first `consumed` and calls again with the rest after running
  /// the action, until the action is `read` or ends the exchange.
  mutating func bytesRead(_ bytes: UnsafeRawBufferPointer) -> (action: Action, consumed: Int) {
    switch state {
    case .readingHead:
      if !bytes.isEmpty { receivedAny = true }
      return readHead(bytes)
    case .readingBody:
      return readBody(bytes)
    case .idle:
      // Bytes nobody asked for: never to be read as the next answer.
      return (close(.close), 0)
    case .writingHead, .writingBody, .closed:
      return (unexpected(), 0)
    }
  }

  /// The peer ended the stream (a read returned nothing).
  mutating func peerClosed() -> Action {
    switch state {
    case .readingHead:
      // Nothing of a final head had arrived: an empty reply, as curl says it.
      guard scanned == 0 else {
        return headFailed(
          URLError(
            .cannotParseResponse,
            userInfo: [NSLocalizedDescriptionKey: "The connection closed in the middle of the response head"]),
          withoutReply: false)
      }
      return headFailed(SocketExchangeEnding.emptyReply, withoutReply: true)
    case .readingBody:
      switch framing {
      case .none:
        return finishBody(bytesAfter: false)
      case .length:
        return close(.fail(Self.closedEarly(remaining: remaining)))
      case .chunked:
        return close(
          .fail(
            URLError(
              .networkConnectionLost,
              userInfo: [NSLocalizedDescriptionKey: "transfer closed with outstanding read data remaining"])))
      case .untilClose:
        return close(.finish(keep: false, keepFor: nil))
      }
    case .idle:
      return close(.close)
    case .writingHead, .writingBody, .closed:
      return unexpected()
    }
  }

  /// A read failed with `error`: a reset, or an idle timeout (`.timedOut`, measured by the
  /// connection).
  mutating func readFailed(_ error: URLError) -> Action {
    switch state {
    case .readingHead:
      return headFailed(error, withoutReply: false)
    case .readingBody:
      return close(.fail(error))
    case .idle:
      return close(.close)
    case .writingHead, .writingBody, .closed:
      return unexpected()
    }
  }

  /// The driver drops the body of the head just delivered (a redirect the exchange follows
  /// with a new task, or refused): the connection goes on only if there is no body.
  mutating func abandonBody() -> Action {
    guard state == .readingBody else { return unexpected() }
    guard framing == .none || framing == .length(0) else { return close(.finish(keep: false, keepFor: nil)) }
    return finishBody(bytesAfter: bytesAfterHead)
  }

  /// The exchange was cancelled (the connection was stopped): it fails, and the connection
  /// carries nothing more.
  mutating func cancel() -> Action {
    switch state {
    case .idle, .closed:
      return close(.close)
    case .writingHead, .writingBody, .readingHead, .readingBody:
      return close(.fail(URLError(.cancelled)))
    }
  }

  // MARK: Reading

  /// Reads the head of the final response from `bytes`, skipping interim ones.
  private mutating func readHead(_ bytes: UnsafeRawBufferPointer) -> (action: Action, consumed: Int) {
    var offset = 0
    while true {
      let pending = UnsafeRawBufferPointer(rebasing: bytes[offset...])
      // Five bytes tell whether the server answers in HTTP at all (an SSH or SMTP server greets
      // the client first): said at once, not after an idle timeout.
      if pending.count >= 5, !pending.prefix(5).elementsEqual("HTTP/".utf8) {
        return (headFailed(Self.notHTTP, withoutReply: false), offset)
      }
      // Only the bytes that arrived since the last look are scanned (less the three a line end
      // may straddle): a head arriving a byte at a time costs linear time, not quadratic.
      let from = max(0, scanned - 3)
      guard let found = HTTP1ResponseHead.end(in: UnsafeRawBufferPointer(rebasing: pending[from...])) else {
        scanned = pending.count
        guard scanned < HTTP1ResponseHead.maximumSize else {
          return (headFailed(Self.headTooLong, withoutReply: false), offset)
        }
        return (.read, offset)
      }
      let length = from + found
      // A long head that arrived in one read is refused too, not only one still arriving.
      guard length <= HTTP1ResponseHead.maximumSize else {
        return (headFailed(Self.headTooLong, withoutReply: false), offset)
      }
      let head: HTTP1ResponseHead
      do {
        head = try HTTP1ResponseHead.parse(UnsafeRawBufferPointer(rebasing: pending[..<length]))
      } catch {
        return (headFailed(error, withoutReply: false), offset)
      }
      offset += length
      scanned = 0
      guard (100..<200).contains(head.statusCode) else {
        return (deliver(head, bytesAfter: offset < bytes.count), offset)
      }
      // 101 would switch protocols: nothing this transport asks for.
      guard head.statusCode != 101 else {
        return (headFailed(URLError(.cannotParseResponse), withoutReply: false), offset)
      }
      interimResponses += 1
      guard interimResponses <= Self.maximumInterimResponses else {
        let error = URLError(
          .cannotParseResponse,
          userInfo: [
            NSLocalizedDescriptionKey: "More than \(Self.maximumInterimResponses) interim (1xx) responses"
          ])
        return (headFailed(error, withoutReply: false), offset)
      }
    }
  }

  /// The final head arrived: its body's framing decides how it is read and whether the
  /// connection can be kept.
  private mutating func deliver(_ head: HTTP1ResponseHead, bytesAfter: Bool) -> Action {
    let framing: HTTP1BodyFraming
    do {
      framing = try HTTP1BodyFraming(head: head, method: method)
    } catch {
      state = .closed
      return .deliverHead(head, framing: .failure(error))
    }
    self.framing = framing
    if case .length(let length) = framing { remaining = length }
    bytesAfterHead = bytesAfter
    // Kept only if the whole request went out, neither side said it closes, and neither body
    // is read until the connection closes.
    keepable =
      ending.error == nil && requestFraming != .untilClose && !requestCloses && Self.isPersistent(head)
      && framing != .untilClose
    keepFor = Self.keepAliveTimeout(head)
    state = .readingBody
    return .deliverHead(head, framing: .success(framing))
  }

  /// Reads the body from `bytes`: one run of it per call.
  private mutating func readBody(_ bytes: UnsafeRawBufferPointer) -> (action: Action, consumed: Int) {
    switch framing {
    case .none:
      return (finishBody(bytesAfter: !bytes.isEmpty), 0)
    case .length:
      guard remaining > 0 else { return (finishBody(bytesAfter: !bytes.isEmpty), 0) }
      guard !bytes.isEmpty else { return (.read, 0) }
      let count = Int(min(Int64(bytes.count), remaining))
      remaining -= Int64(count)
      return (.deliverBody(UnsafeRawBufferPointer(rebasing: bytes[..<count])), count)
    case .chunked:
      guard !chunks.isDone else { return (finishBody(bytesAfter: !bytes.isEmpty), 0) }
      guard !bytes.isEmpty else { return (.read, 0) }
      let consumed: Int
      let data: Range<Int>?
      do {
        (consumed, data) = try chunks.next(bytes)
      } catch {
        return (close(.fail(error)), 0)
      }
      guard let data else {
        // Control bytes only (sizes, line ends, trailers): all of them consumed, or the end.
        return chunks.isDone ? (finishBody(bytesAfter: consumed < bytes.count), consumed) : (.read, consumed)
      }
      return (.deliverBody(UnsafeRawBufferPointer(rebasing: bytes[data])), consumed)
    case .untilClose:
      guard !bytes.isEmpty else { return (.read, 0) }
      return (.deliverBody(bytes), bytes.count)
    }
  }

  /// The body ended at its framed end; `bytesAfter`: bytes followed it, which nobody asked for.
  private mutating func finishBody(bytesAfter: Bool) -> Action {
    guard keepable, !bytesAfter else { return close(.finish(keep: false, keepFor: nil)) }
    state = .idle
    keptExchanges += 1
    return .finish(keep: true, keepFor: keepFor)
  }

  /// Reading the head failed with `error`; `withoutReply`: the stream ended before any byte of
  /// a final response.
  ///
  /// On a kept-alive connection that ended or was reset before any byte of a response, the
  /// request may go again (when nothing of its body was sent, or it can be sent again).
  private mutating func headFailed(_ error: URLError, withoutReply: Bool) -> Action {
    if isReused, !receivedAny, error.code == .networkConnectionLost, !sentBodyBytes || isRepeatable {
      return close(.retry(error))
    }
    if withoutReply { ending.serverClosedWithoutReply() } else { ending.receiveFailed(error) }
    return close(.fail(ending.error ?? error))
  }

  /// Closes the machine and returns `action`.
  private mutating func close(_ action: Action) -> Action {
    state = .closed
    return action
  }

  /// An event the state does not expect: a driver's mistake, which ends the connection.
  private mutating func unexpected() -> Action {
    assertionFailure("HTTP1ConnectionStateMachine: unexpected event in state \(state)")
    return close(.fail(URLError(.unknown)))
  }

  // MARK: Persistence

  /// Whether the comma-separated `list` has `token` (compared as ASCII, case-insensitively).
  static func hasToken(_ list: String, _ token: String) -> Bool {
    list.utf8.split(separator: UInt8(ascii: ",")).contains {
      FieldSyntax.equalsIgnoringASCIICase(
        String(decoding: FieldSyntax.trimmingWhitespace($0), as: UTF8.self), token)
    }
  }

  /// Whether the server keeps the connection open after `head`: HTTP/1.1 unless it says
  /// `close`, HTTP/1.0 only if it says `keep-alive`.
  static func isPersistent(_ head: HTTP1ResponseHead) -> Bool {
    let connection = head.values(of: "Connection").joined(separator: ",")
    if hasToken(connection, "close") { return false }
    if head.version == "HTTP/1.1" { return true }
    return hasToken(connection, "keep-alive")
  }

  /// How long the server keeps an idle connection, less a second, when it says so
  /// (`Keep-Alive: timeout=5`); `nil` when it does not.
  static func keepAliveTimeout(_ head: HTTP1ResponseHead) -> TimeInterval? {
    for value in head.values(of: "Keep-Alive") {
      for element in value.utf8.split(separator: UInt8(ascii: ",")) {
        let parameter = String(decoding: FieldSyntax.trimmingWhitespace(element), as: UTF8.self)
        let parts = parameter.split(separator: "=", maxSplits: 1)
        guard parts.count == 2, FieldSyntax.equalsIgnoringASCIICase(String(parts[0]), "timeout"),
          let seconds = Int(parts[1].trimmingCharacters(in: .whitespaces))
        else { continue }
        return TimeInterval(max(0, seconds - 1))
      }
    }
    return nil
  }

  // MARK: Errors

  /// The error of an answer that is not HTTP.
  static var notHTTP: URLError {
    URLError(
      .cannotParseResponse,
      userInfo: [
        NSLocalizedDescriptionKey:
          "Received something that is not an HTTP response (the server did not answer in HTTP)"
      ])
  }

  /// The error of a head longer than `HTTP1ResponseHead.maximumSize`.
  static var headTooLong: URLError {
    URLError(
      .cannotParseResponse,
      userInfo: [
        NSLocalizedDescriptionKey: "The response head is longer than \(HTTP1ResponseHead.maximumSize) bytes"
      ])
  }

  /// The error of a body with a length that ended `remaining` bytes early.
  static func closedEarly(remaining: Int64) -> URLError {
    URLError(
      .networkConnectionLost,
      userInfo: [NSLocalizedDescriptionKey: "transfer closed with \(remaining) bytes remaining to read"])
  }
}
