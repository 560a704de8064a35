import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The session delegate of a client: routes each task's events to its `Exchange`.
///
/// FoundationNetworking ignores per-task delegates (`URLSessionTask.delegate`; measured on
/// Swift 6.3.1: a task with only a task delegate never completes), so one delegate serves the
/// whole session and looks exchanges up by task identifier.
final class SessionDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
  // Safety of `@unchecked Sendable`: `exchanges` is read and written only while `lock` is held.
  private let lock = NSLock()
  private var exchanges: [Int: Exchange] = [:]

  /// Registers `exchange` before its task is resumed.
  func add(_ exchange: Exchange) {
    lock.lock()
    exchanges[exchange.task.taskIdentifier] = exchange
    lock.unlock()
  }

  private func exchange(for task: URLSessionTask, removing: Bool = false) -> Exchange? {
    lock.lock()
    defer { lock.unlock() }
    return removing ? exchanges.removeValue(forKey: task.taskIdentifier) : exchanges[task.taskIdentifier]
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
    completionHandler(exchange(for: task)?.redirect(to: request))
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
  ) {
    // FoundationNetworking on Linux raises no server-trust challenge: libcurl verifies TLS
    // certificates itself, and this client has no option to turn that off.
    // Answering a Basic (or other) challenge by default hangs FoundationNetworking forever
    // (measured on Swift 6.3.1). Refusing it ends the task at once; the 401 is then delivered.
    exchange(for: task)?.refuseChallenge()
    completionHandler(.cancelAuthenticationChallenge, nil)
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    exchange(for: task, removing: true)?.complete(error: error)
  }
}
