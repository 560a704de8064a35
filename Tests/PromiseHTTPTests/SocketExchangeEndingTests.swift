import Foundation
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The error a socket task ends with when both sides of an upload failed, fed the events in
/// every order the race between them can give.
@Suite("SocketExchangeEnding")
struct SocketExchangeEndingTests {
  typealias Event = (inout SocketExchangeEnding) -> Void

  static let brokenPipe = URLError(
    .networkConnectionLost, userInfo: [NSLocalizedDescriptionKey: "Send failure: Broken pipe"])
  static let answered = URLError(
    .networkConnectionLost,
    userInfo: [NSLocalizedDescriptionKey: "The server answered before the whole body was sent"])
  static let closed = URLError(
    .networkConnectionLost,
    userInfo: [NSLocalizedDescriptionKey: "The server closed the connection before the whole body was sent"])
  static let reset = URLError(
    .networkConnectionLost, userInfo: [NSLocalizedDescriptionKey: "Recv failure: Connection reset by peer"])
  static let cutHead = URLError(
    .cannotParseResponse,
    userInfo: [NSLocalizedDescriptionKey: "The connection closed in the middle of the response head"])

  /// The error after `events`, checked to be the same in the reverse order.
  static func error(after events: [Event], sourceLocation: SourceLocation = #_sourceLocation) -> URLError? {
    var forward = SocketExchangeEnding()
    for event in events { event(&forward) }
    var backward = SocketExchangeEnding()
    for event in events.reversed() { event(&backward) }
    #expect(forward.error == backward.error, "the order changed the outcome", sourceLocation: sourceLocation)
    return forward.error
  }

  static func message(_ error: URLError?) -> String? {
    error?.userInfo[NSLocalizedDescriptionKey] as? String
  }

  @Test(arguments: [brokenPipe, answered, closed])
  func aServerThatClosedWithoutAByteOfAnswerIsAnEmptyReplyWhateverTheSendSaw(_ sendFailure: URLError) {
    let error = Self.error(after: [{ $0.sendFailed(sendFailure) }, { $0.serverClosedWithoutReply() }])
    #expect(error?.code == .networkConnectionLost)
    #expect(Self.message(error) == "Empty reply from server")
  }

  @Test func anEmptyReplyWithNothingSentWrongIsOneToo() {
    var ending = SocketExchangeEnding()
    ending.serverClosedWithoutReply()
    #expect(Self.message(ending.error) == "Empty reply from server")
  }

  @Test(arguments: [reset, cutHead])
  func otherwiseTheSendFailureIsKeptOverTheReadOne(_ receiveFailure: URLError) {
    for sendFailure in [Self.brokenPipe, Self.answered] {
      let error = Self.error(after: [{ $0.sendFailed(sendFailure) }, { $0.receiveFailed(receiveFailure) }])
      #expect(error == sendFailure)
    }
  }

  @Test func aReadFailureAloneIsReportedAsItIs() {
    #expect(Self.error(after: [{ $0.receiveFailed(Self.reset) }]) == Self.reset)
    #expect(SocketExchangeEnding().error == nil)
  }

  @Test func theFirstFailureOfEachSideIsKept() {
    var ending = SocketExchangeEnding()
    ending.sendFailed(Self.answered)
    ending.sendFailed(Self.brokenPipe)
    ending.receiveFailed(Self.cutHead)
    ending.receiveFailed(Self.reset)
    #expect(ending.sendFailure == Self.answered)
    #expect(ending.receiveFailure == Self.cutHead)
  }
}
