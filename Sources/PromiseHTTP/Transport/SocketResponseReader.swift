import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Reads a response from a connection through one buffer: the head, then the body.
struct SocketResponseReader {
  private let connection: SocketConnection
  private let buffer: UnsafeMutableRawBufferPointer
  /// The bytes in `buffer` read but not consumed: `start..<end`.
  private var start = 0
  private var end = 0

  init(connection: SocketConnection, buffer: UnsafeMutableRawBufferPointer) {
    self.connection = connection
    self.buffer = buffer
  }

  /// Reads more bytes after the unconsumed ones (moved to the front first); returns how many
  /// arrived, 0 at the end of the stream.
  private mutating func fill() throws(URLError) -> Int {
    if start > 0 {
      if end > start {
        buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: end - start)
      }
      end -= start
      start = 0
    }
    guard end < buffer.count else { return 0 }
    let count = try connection.receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[end...]))
    end += count
    if count > 0 { receivedAny = true }
    return count
  }

  private var unconsumed: UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(rebasing: buffer[start..<end])
  }

  /// Whether any byte has arrived.
  private(set) var receivedAny = false

  /// Whether bytes arrived after the end of the body just read: nothing a request asked for,
  /// so the connection must not carry another exchange.
  var hasBytesAfterBody: Bool { start < end }

  /// Whether `readHead()` found the end of the stream before any byte of a final response: it
  /// then threw `SocketExchangeEnding.emptyReply`.
  private(set) var endedWithoutReply = false

  /// Reads the head of the final response, skipping interim (1xx) ones.
  mutating func readHead() throws(URLError) -> HTTP1ResponseHead {
    // A server that sends interim responses without end would keep the task reading: bytes keep
    // arriving, so no idle timeout ends it.
    for _ in 0...Self.maximumInterimResponses {
      var scanned = 0
      while true {
        // Only the bytes that arrived since the last look are scanned (less the three a line
        // end may straddle): a head arriving a byte at a time costs linear time, not quadratic.
        // Five bytes tell whether the server answers in HTTP at all (an SSH or SMTP server
        // greets the client first): said at once, not after an idle timeout.
        if end - start >= 5, !unconsumed.prefix(5).elementsEqual("HTTP/".utf8) { throw Self.notHTTP }
        let from = max(0, scanned - 3)
        if let found = HTTP1ResponseHead.end(in: UnsafeRawBufferPointer(rebasing: unconsumed[from...])) {
          let length = from + found
          // A long head that arrived in one read is refused too, not only one still arriving.
          guard length <= HTTP1ResponseHead.maximumSize else { throw Self.headTooLong }
          let head = try HTTP1ResponseHead.parse(UnsafeRawBufferPointer(rebasing: unconsumed[..<length]))
          start += length
          guard (100..<200).contains(head.statusCode) else { return head }
          // 101 would switch protocols: nothing this transport asks for.
          guard head.statusCode != 101 else { throw URLError(.cannotParseResponse) }
          break
        }
        scanned = end - start
        guard scanned < HTTP1ResponseHead.maximumSize else { throw Self.headTooLong }
        guard try fill() > 0 else {
          endedWithoutReply = scanned == 0
          if endedWithoutReply { throw SocketExchangeEnding.emptyReply }
          throw URLError(
            .cannotParseResponse,
            userInfo: [NSLocalizedDescriptionKey: "The connection closed in the middle of the response head"])
        }
      }
    }
    throw URLError(
      .cannotParseResponse,
      userInfo: [
        NSLocalizedDescriptionKey: "More than \(Self.maximumInterimResponses) interim (1xx) responses"
      ])
  }

  /// The most interim (1xx) responses read before the final one.
  private static let maximumInterimResponses = 16

  /// Reads the body framed as `framing`, passing its bytes to `emit` as they arrive.
  mutating func readBody(
    _ framing: HTTP1BodyFraming, emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
  ) throws(URLError) {
    switch framing {
    case .none:
      return
    case .length(var remaining):
      while remaining > 0 {
        if start == end {
          start = 0
          end = 0
          guard try fill() > 0 else { throw Self.closedEarly(remaining: remaining) }
        }
        let count = Int(min(Int64(end - start), remaining))
        try emit(UnsafeRawBufferPointer(rebasing: buffer[start..<start + count]))
        start += count
        remaining -= Int64(count)
      }
    case .chunked:
      var decoder = HTTP1ChunkedDecoder()
      while true {
        if start < end {
          start += try decoder.decode(unconsumed, emit: emit)
          if decoder.isDone { return }
        }
        start = 0
        end = 0
        guard try fill() > 0 else {
          throw URLError(
            .networkConnectionLost,
            userInfo: [NSLocalizedDescriptionKey: "transfer closed with outstanding read data remaining"])
        }
      }
    case .untilClose:
      while true {
        if start < end {
          try emit(unconsumed)
        }
        start = 0
        end = 0
        guard try fill() > 0 else { return }
      }
    }
  }

  private static var notHTTP: URLError {
    URLError(
      .cannotParseResponse,
      userInfo: [
        NSLocalizedDescriptionKey:
          "Received something that is not an HTTP response (the server did not answer in HTTP)"
      ])
  }

  private static var headTooLong: URLError {
    URLError(
      .cannotParseResponse,
      userInfo: [
        NSLocalizedDescriptionKey: "The response head is longer than \(HTTP1ResponseHead.maximumSize) bytes"
      ])
  }

  private static func closedEarly(remaining: Int64) -> URLError {
    URLError(
      .networkConnectionLost,
      userInfo: [NSLocalizedDescriptionKey: "transfer closed with \(remaining) bytes remaining to read"])
  }
}
