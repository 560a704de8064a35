/// What the server does with a request's body, decided from the request's head before any of
/// the body is read.
///
/// Register it per route with ``Router/on(_:_:body:_:)``, or for every request with
/// ``LoopbackServer/init(handler:bodyHandling:)``. The closure that returns it gets the
/// request without its body (so a ``Counter`` can make attempts differ); it runs on the
/// connection's thread.
///
/// ```swift
/// router.on("PUT", "/upload", body: { _ in .consume() }) { request in
///   .respond(.text("\(request.consumedBody!.byteCount) bytes\n"))
/// }
/// ```
public enum RequestBodyHandling: Sendable {
  /// Reads the whole body into ``RecordedRequest/body`` (at most 256 MiB, else `413`): what
  /// the server does unless told otherwise.
  case buffer
  /// Reads the body (`Content-Length` or chunked) as it arrives without keeping it: its size
  /// and ``ByteChecksum`` are recorded in ``RecordedRequest/consumedBody``, and it is written
  /// to a new file at `path` when one is given. There is no size limit, and memory stays flat.
  ///
  /// When the client stops sending before the end, the request is still recorded (with
  /// ``ConsumedBody/isComplete`` `false`), but not answered.
  case consume(savingTo: String? = nil)
  /// Answers with `action` before reading any of the body (no `100 Continue` is sent to a
  /// client that asked for one), then closes the connection: for example `413` to an upload
  /// that is too large. The handler is not called; the request is recorded without its body.
  case respondBeforeBody(ServerAction)
  /// Reads `afterBytes` bytes of the body (after `100 Continue` when asked for), then resets
  /// the connection (RST) without answering. Unread input makes any close a reset, so there is
  /// no FIN variant. The request is recorded with the bytes read in
  /// ``RecordedRequest/consumedBody`` (``ConsumedBody/isComplete`` `false`, unless the body
  /// was no longer than `afterBytes`); the handler is not called.
  case cut(afterBytes: Int64)
  /// Reads the body as ``consume(savingTo:)`` does (nothing kept), but slowly: it pauses
  /// `pause` after each `chunkSize` bytes of the first `slowBytes` of the body (of all of it
  /// when `nil`), then reads the rest at full speed, and answers. The client's sending waits
  /// meanwhile, once the sockets' buffers are full: an upload over a slow link. A pause longer
  /// than the test stalls the upload (``LoopbackServer/stop()`` ends it); the request is then
  /// recorded with the bytes read (``ConsumedBody/isComplete`` `false`) and not answered.
  /// The rate is about `chunkSize` per `pause` (the server reads at most `chunkSize`, up to
  /// 256 KiB, at a time).
  case throttle(chunkSize: Int, pause: Duration, slowBytes: Int64? = nil)
}

/// What the server recorded of a body it consumed without keeping it (see
/// ``RequestBodyHandling/consume(savingTo:)``).
public struct ConsumedBody: Sendable, Hashable {
  /// The number of body bytes read, after removing chunked framing.
  public let byteCount: Int64
  /// The checksum of those bytes; compare it with ``GeneratedBody/checksum``.
  public let checksum: ByteChecksum
  /// The file the bytes were written to, or `nil` when they were dropped.
  public let savedPath: String?
  /// Whether the whole body arrived: `false` when the client stopped sending early or the
  /// server cut the upload.
  public let isComplete: Bool

  /// Creates a record of a consumed body; the server does this for you.
  public init(byteCount: Int64, checksum: ByteChecksum, savedPath: String? = nil, isComplete: Bool = true) {
    self.byteCount = byteCount
    self.checksum = checksum
    self.savedPath = savedPath
    self.isComplete = isComplete
  }
}
