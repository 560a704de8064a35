import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The session delegate of a client: routes each task's events to its `Exchange`.
///
/// FoundationNetworking ignores per-task delegates (`URLSessionTask.delegate`; measured on
/// Swift 6.3.1: a task with only a task delegate never completes), so one delegate serves the
/// whole session and looks exchanges up by task identifier.
final class SessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
  /// The exchanges by task identifier.
  private let exchanges = LockedBox<[Int: Exchange]>([:])

  /// Registers `exchange` as the one `task` serves, before the task is resumed.
  func add(_ exchange: Exchange, for task: URLSessionTask) {
    exchanges.withLock { $0[task.taskIdentifier] = exchange }
  }

  private func exchange(for task: URLSessionTask, removing: Bool = false) -> Exchange? {
    exchanges.withLock {
      removing ? $0.removeValue(forKey: task.taskIdentifier) : $0[task.taskIdentifier]
    }
  }

  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
  ) {
    completionHandler(exchange(for: dataTask)?.receive(response) ?? .cancel)
  }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    exchange(for: dataTask)?.append(data)
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
  ) {
    guard let exchange = exchange(for: task) else { return completionHandler(nil) }
    exchange.redirect(response, to: request, answer: completionHandler)
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
  ) {
    switch Self.answer(toChallengeWith: challenge.protectionSpace.authenticationMethod) {
    case .performDefaultHandling:
      completionHandler(.performDefaultHandling, nil)
    case .cancel:
      exchange(for: task)?.refuseChallenge()
      completionHandler(.cancelAuthenticationChallenge, nil)
    }
  }

  /// How the client answers an authentication challenge, before it becomes a
  /// `URLSession.AuthChallengeDisposition` (a type of our own, so the decision is testable on
  /// every platform).
  enum ChallengeAnswer: Equatable {
    /// Let the system decide: for TLS, the platform's certificate checks.
    case performDefaultHandling
    /// Cancel the challenge; the response that raised it (a 401 or 407) is delivered.
    case cancel
  }

  /// Returns the answer to a challenge whose protection space has `method`, one of the
  /// `NSURLAuthenticationMethod…` constants.
  ///
  /// TLS challenges (server trust, client certificate) get the system's default handling: on
  /// Apple platforms every HTTPS connection raises a server-trust challenge, and cancelling it
  /// would fail every HTTPS request, while the default handling is the platform's certificate
  /// validation, which this client has no option to weaken. FoundationNetworking on Linux raises
  /// neither (libcurl verifies certificates itself).
  ///
  /// HTTP challenges (`Basic`, `Digest`, NTLM, Negotiate and any other) are cancelled: answering
  /// one by default hangs FoundationNetworking forever, while cancelling ends the task at once
  /// and the 401 (or 407) is delivered as the response (both measured on Linux, Swift 6.3.1).
  static func answer(toChallengeWith method: String) -> ChallengeAnswer {
    switch method {
    case serverTrustMethod, clientCertificateMethod: .performDefaultHandling
    default: .cancel
    }
  }

  #if canImport(FoundationNetworking)
    // swift-corelibs-foundation marks these constants unavailable; their values are their names,
    // as in Apple's Foundation.
    static let serverTrustMethod = "NSURLAuthenticationMethodServerTrust"
    static let clientCertificateMethod = "NSURLAuthenticationMethodClientCertificate"
  #else
    static let serverTrustMethod = NSURLAuthenticationMethodServerTrust
    static let clientCertificateMethod = NSURLAuthenticationMethodClientCertificate
  #endif

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64
  ) {
    exchange(for: task)?.sent(totalBytes: totalBytesSent)
  }

  /// Gives a new body stream when libcurl rewinds one (to resend it on a new connection, say).
  ///
  /// Without one, FoundationNetworking goes on reading the old stream from where it was,
  /// corrupting the body. A file body gets none: FoundationNetworking traps when given a stream
  /// for it.
  func urlSession(
    _ session: URLSession, task: URLSessionTask,
    needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
  ) {
    completionHandler(exchange(for: task)?.rewoundBodyStream())
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    exchange(for: task, removing: true)?.complete(error: error, taskResponse: task.response)
  }
}
