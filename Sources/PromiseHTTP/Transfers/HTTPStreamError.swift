/// Why reading a streamed body (`HTTPClient.stream`) failed, when the request itself did not.
///
/// The request's own failures (a cut connection, a deadline, a bad status) are `HTTPError`s.
public enum HTTPStreamError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The body was iterated a second time: a streamed body has a single reader, and its bytes
  /// are gone once read.
  case alreadyIterated
  /// A line grew past `limit` bytes without a newline (`HTTPLineSequence`); the request was
  /// cancelled rather than the line kept growing in memory.
  case lineTooLong(limit: Int)
  /// The reader fell more than `limit` bytes behind the server: the bytes waiting for it on
  /// disk reached the limit, and the request was cancelled.
  case readerFellBehind(limit: Int64)
  /// The temporary file that holds the bytes a slow reader has not read yet could not be
  /// created, written or read (a full disk, say); the request was cancelled.
  case bufferFailed(String)

  /// What went wrong, in a sentence.
  public var description: String {
    switch self {
    case .alreadyIterated:
      "the streamed body was already iterated: it has a single reader"
    case .lineTooLong(let limit):
      "a line of the streamed body is longer than the limit of \(limit) bytes"
    case .readerFellBehind(let limit):
      "the reader fell more than \(limit) bytes behind the streamed body"
    case .bufferFailed(let reason):
      "the buffer of the streamed body failed: \(reason)"
    }
  }
}
