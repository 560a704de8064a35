/// A response whose body is a ``GeneratedBody`` written as it is produced, with range support
/// and transfer faults; the server answers with it for ``ServerAction/stream(_:)``.
///
/// For a `GET` with a `Range: bytes=…` field (one range: `N-`, `N-M` or `-SUFFIX`) the server
/// answers `206 Partial Content` with `Content-Range: bytes N-M/TOTAL`, or `416` with
/// `Content-Range: bytes */TOTAL` when the range starts at or after the end. An `If-Range`
/// field turns the range off (full `200`) unless it is a strong entity tag equal to ``etag``
/// or a date equal to ``lastModified``. Several ranges, a malformed one, another unit or a
/// status other than `200` also get the full body. `HEAD` gets the headers only.
///
/// The body goes out in writes of ``writeSize`` bytes (256 KiB by default); a 1 GiB body
/// costs one buffer of that size, not 1 GiB. The connection stays open afterwards unless a
/// fault, the framing or either side's `Connection: close` ends it.
///
/// ```swift
/// let body = GeneratedBody(length: 4 << 20, seed: 3)
/// let calls = Counter()
/// router.on("GET", "/file") { _ in
///   // The first attempt breaks off after 1 MiB; the retry (with Range) completes it.
///   .stream(StreamedResponse(body: body, etag: "\"v1\"",
///                            faults: calls.next() == 1 ? [.closeAfter(bytes: 1 << 20)] : []))
/// }
/// ```
public struct StreamedResponse: Sendable {
  /// The full representation; a range request gets a slice of it.
  public var body: GeneratedBody
  /// The status of a full answer (`200` by default); range requests are honoured only for `200`.
  public var status: Int
  /// Header fields sent as they are, before the ones the server adds (`Content-Length` or
  /// `Transfer-Encoding`, `Content-Range`, `Accept-Ranges`, `ETag`, `Last-Modified`).
  public var headers: [(String, String)]
  /// The `ETag` field value, quotes included (`"\"v1\""`, or `"W/\"v1\""` for a weak tag that
  /// never satisfies `If-Range`); `nil` sends none.
  public var etag: String?
  /// The `Last-Modified` field value, or `nil` for none.
  ///
  /// An HTTP-date such as `Tue, 15 Nov 1994 08:12:31 GMT`; an `If-Range` date must equal it
  /// exactly.
  public var lastModified: String?
  /// How the end of the body is marked.
  public var framing: Framing
  /// The size of each write (256 KiB by default; a ``TransferFault/drip(chunkSize:interval:)``
  /// fault uses its own chunk size).
  public var writeSize: Int
  /// The faults to inject; they combine (for example a drip that is cut after 10 KiB).
  public var faults: [TransferFault]

  /// How the end of a streamed body is marked.
  public enum Framing: Sendable, Hashable {
    /// `Content-Length` with the size of the full body or of the range.
    case contentLength
    /// `Transfer-Encoding: chunked`, one chunk per write; the client cannot know the size.
    case chunked
    /// Neither: the server closes the connection after the last byte (HTTP/1.0 style).
    case untilClose
  }

  /// Creates a streamed response.
  ///
  /// - Parameters:
  ///   - body: The full representation.
  ///   - status: The status of a full answer; ranges are honoured only for `200`.
  ///   - headers: Extra header fields; `Content-Type: application/octet-stream` by default.
  ///   - etag: The `ETag` value with its quotes (see ``GeneratedBody/etag`` for one derived
  ///     from the body), or `nil` for none.
  ///   - lastModified: The `Last-Modified` value, or `nil` for none.
  ///   - framing: How the end of the body is marked.
  ///   - writeSize: The size of each write.
  ///   - faults: The faults to inject.
  public init(
    body: GeneratedBody,
    status: Int = 200,
    headers: [(String, String)] = [("Content-Type", "application/octet-stream")],
    etag: String? = nil,
    lastModified: String? = nil,
    framing: Framing = .contentLength,
    writeSize: Int = 256 * 1024,
    faults: [TransferFault] = []
  ) {
    self.body = body
    self.status = status
    self.headers = headers
    self.etag = etag
    self.lastModified = lastModified
    self.framing = framing
    self.writeSize = writeSize
    self.faults = faults
  }
}

/// A deliberate misbehaviour of a ``StreamedResponse``.
///
/// Byte counts are of the body this response sends (the range, when it is one), not offsets
/// in the full representation.
public enum TransferFault: Sendable, Hashable {
  /// Sends the headers (with the honest length) and `bytes` bytes of the body, then closes
  /// the connection cleanly (FIN): the client sees a short body.
  case closeAfter(bytes: Int64)
  /// Sends the headers and `bytes` bytes of the body, then resets the connection (RST).
  case resetAfter(bytes: Int64)
  /// Ignores `Range` (and `If-Range`): always `200` with the whole body, and no
  /// `Accept-Ranges` field, like a server without range support.
  case ignoreRange
  /// Answers a range request with a range that starts `by` bytes later (negative: earlier)
  /// than asked, as a server that misreads `Range`: `Content-Range` and the bytes agree with
  /// each other but not with the request, so a client that appends them blindly corrupts its
  /// file.
  case wrongRangeStart(by: Int64)
  /// Declares a `Content-Length` `by` bytes longer (positive) or shorter (negative) than the
  /// body it sends, sends the body, then closes the connection (FIN). Only with
  /// ``StreamedResponse/Framing/contentLength`` framing.
  case wrongContentLength(by: Int64)
  /// Sends the body in `chunkSize`-byte writes, each after a pause of `interval`;
  /// ``LoopbackServer/stop()`` cuts the pauses short and closes the connection.
  case drip(chunkSize: Int, interval: Duration)
  /// Sends a different `ETag` on every request (the configured tag, or ``GeneratedBody/etag``,
  /// with `-1`, `-2`, … appended inside the quotes), so an `If-Range` never matches and every
  /// resume gets the full body. The bytes do not change.
  case changingETag
}

extension GeneratedBody {
  /// Returns a strong entity tag derived from the seed and length, quotes included, for
  /// example `"\"7-100000\""`.
  public var etag: String {
    "\"\(String(seed, radix: 16))-\(String(length, radix: 16))\""
  }
}

extension StreamedResponse {
  /// The faults of one response, gathered from the list (the last of a kind wins).
  struct Plan {
    var cut: (bytes: Int64, reset: Bool)?
    var ignoresRange = false
    var rangeShift: Int64 = 0
    var lengthError: Int64 = 0
    var drip: (chunkSize: Int, interval: Duration)?
    var changesETag = false

    init(_ faults: [TransferFault]) {
      for fault in faults {
        switch fault {
        case .closeAfter(let bytes): cut = (max(0, bytes), false)
        case .resetAfter(let bytes): cut = (max(0, bytes), true)
        case .ignoreRange: ignoresRange = true
        case .wrongRangeStart(let by): rangeShift = by
        case .wrongContentLength(let by): lengthError = by
        case .drip(let chunkSize, let interval): drip = (max(1, chunkSize), interval)
        case .changingETag: changesETag = true
        }
      }
    }
  }
}
