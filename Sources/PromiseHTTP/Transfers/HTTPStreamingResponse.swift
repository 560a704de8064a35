import Foundation

/// A response whose body arrives as a stream: the head now, the bytes as the server sends them.
///
/// Read the body once, with `for try await chunk in response.body` or, for text,
/// `for try await line in response.lines`. Stopping early — `break`, a thrown error, the
/// reading task cancelled, `cancel()`, or releasing the response without reading it — cancels
/// the request: the connection closes and the client's per-host slot frees. The body can be
/// iterated once; a second iterator throws `HTTPStreamError.alreadyIterated`.
///
/// A body that fails after the head (the connection cut, the request's deadline) ends the
/// iteration with that `HTTPError`; nothing is retried once the head has been delivered.
public struct HTTPStreamingResponse: Sendable, CustomStringConvertible {
  /// The status, headers and URLs of the response, with an empty `body`.
  public let head: HTTPResponse
  /// The body, as chunks of bytes (decompressed) in the order they arrived.
  public let body: HTTPBodyStream

  init(head: HTTPResponse, stream: ResponseStream) {
    self.head = head
    self.body = HTTPBodyStream(ResponseStreamLifetime(stream))
  }

  /// The HTTP status code.
  public var statusCode: Int { head.statusCode }
  /// The response's header fields.
  public var headers: HTTPHeaders { head.headers }
  /// The URL of the response, after redirects.
  public var url: URL { head.url }

  /// The body as lines of text, at most `HTTPLineSequence.defaultMaximumLength` bytes each.
  public var lines: HTTPLineSequence { body.lines }

  /// Returns the body as lines of text, at most `maximumLength` bytes each (without the newline).
  public func lines(maximumLength: Int) -> HTTPLineSequence {
    body.lines(maximumLength: maximumLength)
  }

  /// Cancels the request, unless the body has ended.
  ///
  /// The connection closes, the bytes not read yet are dropped, and the reader's next step
  /// throws `CancellationError`.
  public func cancel() {
    body.cancel()
  }

  /// The status and URL, as `HTTPResponse` shows them; never a credential.
  public var description: String {
    "HTTPStreamingResponse(\(head.statusCode), \(Redaction.text(head.url)))"
  }
}

/// The body of an `HTTPStreamingResponse`: an asynchronous sequence of chunks of bytes.
///
/// Chunks are as the transport delivered them: their boundaries carry no meaning. Through
/// `URLSession` a compressed body is decompressed; over the socket transport (see
/// `HTTPClient.Engine`) no encoding is asked for and none is decoded. The sequence
/// ends after the last byte, or throws the error that ended the request (`HTTPError`),
/// `CancellationError` after a cancellation, or an `HTTPStreamError`.
///
/// Memory: the client keeps at most `HTTPBodyStream.defaultBufferSize` bytes in memory for a
/// reader slower than the server. Over the socket transport it then stops reading the
/// connection, and TCP holds the server back. FoundationNetworking cannot pause a transfer (its
/// `URLSessionTask.suspend()` closes the connection, and `resume()` sends the request again),
/// so through `URLSession` what arrives beyond that waits in an unlinked temporary file in
/// `NSTemporaryDirectory()`, which the reader drains in order; past
/// `HTTPBodyStream.defaultSpillLimit` bytes there, the stream fails with
/// `HTTPStreamError.readerFellBehind`.
public struct HTTPBodyStream: AsyncSequence, Sendable {
  /// A chunk of the body.
  public typealias Element = Data

  /// 1 MiB: the bytes a slow reader leaves in memory, at most.
  public static let defaultBufferSize = 1 << 20
  /// 1 GiB: the bytes a slow reader leaves waiting on disk, at most, before the stream fails
  /// (through `URLSession`; the socket transport holds the server back instead).
  public static let defaultSpillLimit: Int64 = 1 << 30

  let lifetime: ResponseStreamLifetime

  init(_ lifetime: ResponseStreamLifetime) {
    self.lifetime = lifetime
  }

  /// Returns the iterator of the body; only the first one made reads it.
  public func makeAsyncIterator() -> AsyncIterator {
    let stream = lifetime.stream
    let claimed = stream.claim()
    return AsyncIterator(
      reader: ResponseStreamLifetime(stream, keeping: lifetime, inert: !claimed), claimed: claimed)
  }

  /// The body as lines of text, at most `HTTPLineSequence.defaultMaximumLength` bytes each.
  public var lines: HTTPLineSequence {
    HTTPLineSequence(body: self, maximumLength: HTTPLineSequence.defaultMaximumLength)
  }

  /// Returns the body as lines of text, at most `maximumLength` bytes each (without the newline).
  public func lines(maximumLength: Int) -> HTTPLineSequence {
    HTTPLineSequence(body: self, maximumLength: maximumLength)
  }

  /// Cancels the request (see `HTTPStreamingResponse.cancel()`).
  public func cancel() {
    lifetime.stream.cancel()
  }

  /// Reads the body's chunks; releasing it before the end cancels the request.
  public struct AsyncIterator: AsyncIteratorProtocol, Sendable {
    let reader: ResponseStreamLifetime
    let claimed: Bool

    /// Returns the next chunk, or `nil` after the last one.
    ///
    /// - Throws: The request's `HTTPError` (a cut, a deadline); `CancellationError` once
    ///   cancelled (cancelling the calling task cancels the request); an `HTTPStreamError`
    ///   (`alreadyIterated` for a second iterator).
    public mutating func next() async throws -> Data? {
      guard claimed else { throw HTTPStreamError.alreadyIterated }
      return try await reader.stream.next()
    }
  }
}
