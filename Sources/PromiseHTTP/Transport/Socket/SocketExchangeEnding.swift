import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The error a socket task ends with when sending the request and reading the response have
/// both failed: decided by what was received, not by which side noticed first.
///
/// A server that stops reading an upload and closes its side without answering is seen by both
/// sides of the task: by the sender (a send that fails with EPIPE or ECONNRESET, a wait to send
/// that finds the end of the stream) and by the reader (the end of the stream, or a reset).
/// Which one comes first is a race between the kernel and the task. What counts is what
/// arrived: no byte of a response before the end of the stream is an empty reply ("Empty reply
/// from server", as curl says for a GET too), whatever the sending side saw; otherwise the
/// send's failure (a reset, or a server that answered before the whole body was sent) says
/// more than the read's, and is kept.
///
/// Events may come in any order; `error` does not depend on it (`SocketExchangeEndingTests`).
struct SocketExchangeEnding: Equatable {
  /// The first failure of sending the request, if it failed.
  private(set) var sendFailure: URLError?
  /// The first failure of reading the response, if it failed.
  private(set) var receiveFailure: URLError?
  /// Whether the server ended the stream before any byte of a final response.
  private(set) var closedWithoutReply = false

  /// Sending the request failed with `error` (the connection lost: reset, or closed).
  mutating func sendFailed(_ error: URLError) {
    if sendFailure == nil { sendFailure = error }
  }

  /// Reading the response failed with `error`, after some bytes of it or with a reset.
  mutating func receiveFailed(_ error: URLError) {
    if receiveFailure == nil { receiveFailure = error }
  }

  /// The reader found the end of the stream with no byte of a final response read.
  mutating func serverClosedWithoutReply() {
    closedWithoutReply = true
  }

  /// The error the task ends with: the empty reply if the server closed without a byte of one,
  /// else the send's failure, else the read's.
  var error: URLError? {
    if closedWithoutReply { return Self.emptyReply }
    return sendFailure ?? receiveFailure
  }

  /// What a connection that ended before any byte of a response fails with, as libcurl says it.
  static var emptyReply: URLError {
    URLError(.networkConnectionLost, userInfo: [NSLocalizedDescriptionKey: "Empty reply from server"])
  }
}
