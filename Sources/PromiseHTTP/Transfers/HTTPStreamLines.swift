import Foundation

/// The lines of a streamed body: for NDJSON, server-sent events, logs.
///
/// A line ends at LF; a CR just before it is dropped (CRLF). A last line without a newline is
/// still a line; an empty body has none. Lines are decoded as UTF-8 once whole, so a character
/// split between two chunks arrives intact; invalid bytes become U+FFFD. A line longer than
/// `maximumLength` bytes fails the sequence with `HTTPStreamError.lineTooLong` and cancels
/// the request, rather than growing in memory.
///
/// The sequence reads the body: like the body, it can be iterated once.
public struct HTTPLineSequence: AsyncSequence, Sendable {
  /// A line, without its newline.
  public typealias Element = String

  /// 1 MiB: far above a line of JSON or an event, small enough that a body without newlines
  /// cannot exhaust memory.
  public static let defaultMaximumLength = 1 << 20

  let body: HTTPBodyStream
  /// The longest line accepted, in bytes, without its newline.
  public let maximumLength: Int

  init(body: HTTPBodyStream, maximumLength: Int) {
    self.body = body
    self.maximumLength = Swift.max(0, maximumLength)
  }

  /// Returns the iterator of the lines.
  public func makeAsyncIterator() -> AsyncIterator {
    AsyncIterator(chunks: body.makeAsyncIterator(), splitter: LineSplitter(maximumLength: maximumLength))
  }

  /// Reads the lines; releasing it before the end cancels the request.
  public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
    var chunks: HTTPBodyStream.AsyncIterator
    var splitter: LineSplitter

    /// Returns the next line, or `nil` after the last one.
    ///
    /// - Throws: What the body throws, or `HTTPStreamError.lineTooLong`.
    public mutating func next() async throws -> String? {
      while true {
        do {
          if let line = try splitter.nextLine() { return line }
        } catch {
          chunks.reader.stream.cancel()
          throw error
        }
        guard let chunk = try await chunks.next() else { return splitter.finish() }
        splitter.append(chunk)
      }
    }
  }
}

/// Cuts bytes into lines at LF, dropping a CR before it; a value, tested alone.
struct LineSplitter: Sendable {
  let maximumLength: Int
  private var bytes: [UInt8] = []
  /// Where the current line starts in `bytes`.
  private var start = 0
  /// Where the search for the next LF resumes (bytes before it hold none).
  private var scanned = 0

  init(maximumLength: Int) {
    self.maximumLength = maximumLength
  }

  /// Adds bytes that arrived.
  mutating func append(_ data: Data) {
    if start > 0, start * 2 >= bytes.count {
      bytes.removeFirst(start)
      scanned -= start
      start = 0
    }
    bytes.append(contentsOf: data)
  }

  /// Returns the next whole line, or `nil` if more bytes are needed.
  ///
  /// - Throws: `HTTPStreamError.lineTooLong` when the line passes `maximumLength`.
  mutating func nextLine() throws -> String? {
    let newline = bytes[scanned...].firstIndex(of: 0x0A)
    guard let newline else {
      scanned = bytes.count
      if bytes.count - start > maximumLength + 1
        || (bytes.count - start > maximumLength && bytes.last != 0x0D)
      {
        throw HTTPStreamError.lineTooLong(limit: maximumLength)
      }
      return nil
    }
    var end = newline
    if end > start, bytes[end - 1] == 0x0D { end -= 1 }
    guard end - start <= maximumLength else { throw HTTPStreamError.lineTooLong(limit: maximumLength) }
    let line = String(decoding: bytes[start..<end], as: UTF8.self)
    start = newline + 1
    scanned = start
    return line
  }

  /// Returns the last line, which has no newline, or `nil` if the body ended with one.
  mutating func finish() -> String? {
    guard start < bytes.count else { return nil }
    var end = bytes.count
    if bytes[end - 1] == 0x0D { end -= 1 }
    let line = String(decoding: bytes[start..<end], as: UTF8.self)
    bytes = []
    start = 0
    scanned = 0
    return line
  }
}
