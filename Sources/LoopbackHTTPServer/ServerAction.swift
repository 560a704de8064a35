/// What the server does with one request: a normal response or a deliberate fault.
///
/// Every fault except ``respond(_:)``, ``slowHeaders(_:delay:)``, ``trickle(_:chunkSize:interval:)``,
/// ``gzipBomb(decompressedSize:)``, ``chunked(_:chunkSize:)`` and ``stream(_:)`` ends the connection
/// (``repeated(head:unit:count:interval:)`` when its units are sent).
public enum ServerAction: Sendable {
  /// Sends the response; the connection stays open unless either side asked for `Connection: close`.
  case respond(ServerResponse)
  /// Closes the connection without writing anything (clients see an empty reply).
  case closeImmediately
  /// Writes part of the status line and headers, then resets the connection (RST via `SO_LINGER` 0).
  case resetMidHeaders
  /// Sends headers with the full `Content-Length` and `afterBytes` of the body, then resets.
  case resetMidBody(ServerResponse, afterBytes: Int)
  /// Sends headers with the full `Content-Length` and only `sendBytes` of the body, then closes
  /// cleanly (FIN).
  case truncatedBody(ServerResponse, sendBytes: Int)
  /// Declares `Content-Length: declared`, sends the real body and keeps the connection open until
  /// the client closes it or the server stops.
  case wrongContentLength(ServerResponse, declared: Int)
  /// Waits `delay` before writing anything, then sends the response; ``LoopbackServer/stop()``
  /// cuts the wait short and closes the connection.
  case slowHeaders(ServerResponse, delay: Duration)
  /// Sends the headers at once, then the body in `chunkSize`-byte pieces, each after a pause of
  /// `interval`.
  case trickle(ServerResponse, chunkSize: Int, interval: Duration)
  /// Sends `200` with `Content-Encoding: gzip` and a valid gzip stream that inflates to
  /// `decompressedSize` zero bytes; the stream is about 1/1000 of that size.
  case gzipBomb(decompressedSize: Int)
  /// Sends the response with `Transfer-Encoding: chunked`, the body cut into `chunkSize`-byte chunks.
  case chunked(ServerResponse, chunkSize: Int)
  /// Sends a generated body as it is produced, never holding it whole, with `Range` support
  /// and the response's transfer faults (see ``StreamedResponse``).
  case stream(StreamedResponse)
  /// Writes `bytes` as they are — status line, header fields and body, well-formed or not (for
  /// example a field value in ISO-8859-1) — then closes the connection.
  case raw([UInt8])
  /// Writes `head` as it is, then `unit` `count` times (without end if `nil`), then closes the
  /// connection; stops early when the client closes it or the server stops. A response that
  /// keeps the client busy: 100,000 header lines, a body of 1-byte chunks, an endless trailer
  /// section.
  ///
  /// With an `interval` of zero the units go out as fast as the client takes them (in writes of
  /// about 64 KiB); otherwise one unit after each pause of `interval`.
  case repeated(head: [UInt8], unit: [UInt8], count: Int?, interval: Duration)
}
