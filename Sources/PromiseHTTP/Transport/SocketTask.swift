import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A task of the socket transport: one request over a TCP connection of its own, read on a
/// thread of its own, its events fed to its `Exchange` as the session delegate feeds a data
/// task's.
///
/// Why it exists: FoundationNetworking hands a body over in 16 KiB pieces, each an operation
/// queued without limit, which holds a large download to about half of curl's throughput and
/// lets its backlog grow by hundreds of MiB (Docs/Performance.md "Transfers"). This task reads
/// the socket and hands each piece to the sink on the same thread: the sink's writes hold the
/// reads back, so memory stays flat, and nothing is queued.
///
/// The events match a data task's: a redirect question (never answered with a request: a hop
/// the exchange follows gets a task of its own, `followsRedirects` is false), the response head,
/// the body, the completion with a `URLError` of the code FoundationNetworking gives the same
/// fault. Cookies are read from and stored to the session's storage. It asks for `identity`
/// unless the request names an `Accept-Encoding`, and passes on a body sent with a
/// `Content-Encoding` as it arrives, undecoded.
final class SocketTask: ExchangeTask {
  private enum Phase {
    case idle
    case running(SocketConnection?)
    case stopped
  }

  private let request: URLRequest
  /// The body the task sends, when it is not the request's `httpBody`.
  private let body: UploadTaskBody?
  private let settings: SocketTransportSettings
  /// Why the task fails before it connects (a pinned host `URLSession` would reach unpinned),
  /// or `nil`.
  private let refusal: URLError?
  private let phase = LockedBox(Phase.idle)
  private let exchange = LockedBox<Exchange?>(nil)
  /// The size of the buffer a read fills: bigger than the socket's default receive buffer, so
  /// that a read takes whatever has arrived.
  static let bufferSize = 256 * 1024

  init(
    _ request: URLRequest, body: UploadTaskBody? = nil, settings: SocketTransportSettings,
    refusal: URLError? = nil
  ) {
    self.request = request
    self.body = body
    self.settings = settings
    self.refusal = refusal
  }

  var followsRedirects: Bool { false }

  /// Notes the exchange the task reports to; called before `resume()`.
  func attach(_ exchange: Exchange) {
    self.exchange.withLock { $0 = exchange }
  }

  func resume() {
    let starts = phase.withLock { phase in
      guard case .idle = phase else { return false }
      phase = .running(nil)
      return true
    }
    guard starts, let exchange = exchange.load() else { return }
    let thread = Thread { [self] in run(exchange) }
    thread.name = "PromiseHTTP.socket"
    thread.start()
  }

  func cancel() {
    let connection: SocketConnection? = phase.withLock { phase in
      defer { phase = .stopped }
      if case .running(let connection) = phase { return connection }
      return nil
    }
    connection?.stop()
  }

  // MARK: The thread

  private func run(_ exchange: Exchange) {
    var response: HTTPURLResponse?
    var failure: URLError?
    do {
      try transfer(exchange, response: &response)
    } catch {
      failure = error
    }
    let connection: SocketConnection? = phase.withLock { phase in
      defer { phase = .stopped }
      if case .running(let connection) = phase { return connection }
      failure = URLError(.cancelled)
      return nil
    }
    connection?.close()
    self.exchange.withLock { $0 = nil }
    exchange.complete(error: failure, taskResponse: response)
  }

  private func transfer(_ exchange: Exchange, response: inout HTTPURLResponse?) throws(URLError) {
    if let refusal { throw refusal }
    guard let url = request.url, var host = url.host else { throw URLError(.badURL) }
    // An IPv6 literal, with or without its brackets depending on the platform's `URL`.
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    let secure = url.scheme?.lowercased() == "https"
    let defaultPort = secure ? 443 : 80
    let port = url.port ?? defaultPort
    // The TLS set-up (OpenSSL loaded, the client's certificates read) fails before connecting.
    let tlsContext = secure ? try settings.tls.context() : nil
    let timeout = request.timeoutInterval > 0 ? request.timeoutInterval : 60
    // A body that cannot be sent (a stream of chunks read already) fails before connecting.
    let outgoing = try SocketOutgoingBody(body, request: request)
    // The connection is the task's before it connects, so that `cancel()` (the request's
    // deadline, too) stops the set-up at once instead of leaving the thread and its socket to an
    // idle timeout.
    let connection = SocketConnection(idleTimeout: timeout)
    defer { connection.close() }
    let started = phase.withLock { phase in
      guard case .running = phase else { return false }
      phase = .running(connection)
      return true
    }
    guard started else { throw URLError(.cancelled) }
    try connection.connect(host: host, port: port)
    if let tlsContext { try connection.startTLS(host: host, context: tlsContext) }
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 1)
    defer { buffer.deallocate() }
    let head = requestHead(url: url, host: host, port: port, defaultPort: defaultPort, body: outgoing)
    try connection.send(contentsOf: head)
    // A server may answer before it has read the whole body (a 413, say) and close: the answer
    // is then what the task delivers, not the failed send. One that closes without answering
    // is an empty reply, whichever side saw it first (`SocketExchangeEnding`).
    var ending = SocketExchangeEnding()
    do {
      try outgoing.send(over: connection, buffer: buffer) { exchange.sent(totalBytes: $0) }
    } catch  where error.code == .networkConnectionLost {
      ending.sendFailed(error)
    }
    var reader = SocketResponseReader(connection: connection, buffer: buffer)
    let responseHead: HTTP1ResponseHead
    do {
      responseHead = try reader.readHead()
    } catch {
      if reader.endedWithoutReply { ending.serverClosedWithoutReply() } else { ending.receiveFailed(error) }
      throw ending.error ?? error
    }
    let http = HTTPURLResponse(
      url: url, statusCode: responseHead.statusCode, httpVersion: responseHead.version,
      headerFields: responseHead.headerFields)!
    storeCookies(of: responseHead, from: url)
    let method = request.httpMethod ?? "GET"
    let framing: HTTP1BodyFraming
    do {
      framing = try HTTP1BodyFraming(head: responseHead, method: method)
    } catch {
      response = http
      throw error
    }
    if let proposed = redirection(http) {
      var withheld = true
      exchange.redirect(http, to: proposed, taskFollowsRedirects: false) { _ in withheld = false }
      // Withheld: the exchange is being cancelled; its stop ends this thread.
      if withheld { throw URLError(.cancelled) }
      // The exchange follows the hop with a task of its own, or refused it and has ended: the
      // 3xx's body is nobody's, and is not read (it could be long, or endless).
      if !exchange.isReceiving { return }
    }
    guard exchange.receive(http) == .allow else { throw URLError(.cancelled) }
    response = http
    try reader.readBody(framing) { bytes in exchange.append(Data(bytes), mayWait: true) }
  }

  /// The request line and header fields, as bytes.
  private func requestHead(
    url: URL, host: String, port: Int, defaultPort: Int, body: SocketOutgoingBody
  ) -> [UInt8] {
    let method = request.httpMethod ?? "GET"
    var target = url.path(percentEncoded: true)
    if target.isEmpty { target = "/" }
    if let query = url.query(percentEncoded: true) { target += "?" + query }
    let hostField = host.contains(":") ? "[\(host)]" : host
    var fields: [(String, String)] = [("Host", port == defaultPort ? hostField : "\(hostField):\(port)")]
    // The framing fields are the transport's, from the body it sends: a caller's own could
    // contradict it (both a length and chunked coding) and make the server misread the request.
    var names: Set<String> = ["host", "content-length", "transfer-encoding"]
    for (name, value) in request.allHTTPHeaderFields ?? [:] where !names.contains(name.lowercased()) {
      names.insert(name.lowercased())
      fields.append((name, value))
    }
    // The session's fields and stored cookies were not checked with the request's: one that
    // would break the head is left out.
    for (name, value) in settings.additionalHeaders
    where !names.contains(name.lowercased()) && SocketTransportSettings.isSafeField(name, value) {
      names.insert(name.lowercased())
      fields.append((name, value))
    }
    if let storage = settings.cookieStorage, let cookies = storage.cookies(for: url), !cookies.isEmpty,
      let header = HTTPCookie.requestHeaderFields(with: cookies)["Cookie"],
      SocketTransportSettings.isSafeField("Cookie", header)
    {
      if let index = fields.firstIndex(where: { $0.0.lowercased() == "cookie" }) {
        fields[index].1 += "; " + header
      } else {
        fields.append(("Cookie", header))
      }
    }
    if !names.contains("accept") { fields.append(("Accept", "*/*")) }
    // This transport does not decode a Content-Encoding: it asks for none.
    if !names.contains("accept-encoding") { fields.append(("Accept-Encoding", "identity")) }
    if !names.contains("user-agent") { fields.append(("User-Agent", "PromiseHTTP")) }
    switch body.framing {
    case .length(let length):
      if length > 0 || ["POST", "PUT", "PATCH"].contains(method.uppercased()) {
        fields.append(("Content-Length", "\(length)"))
      }
    case .chunked:
      fields.append(("Transfer-Encoding", "chunked"))
    case .none, .untilClose:
      break
    }
    var text = "\(method) \(target) HTTP/1.1\r\n"
    for (name, value) in fields { text += "\(name): \(value)\r\n" }
    text += "\r\n"
    return Array(text.utf8)
  }

  /// Stores the cookies a response sets, as FoundationNetworking would.
  private func storeCookies(of head: HTTP1ResponseHead, from url: URL) {
    guard let storage = settings.cookieStorage, settings.acceptsCookies else { return }
    let cookies = head.values(of: "Set-Cookie").flatMap {
      HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": $0], for: url)
    }
    if !cookies.isEmpty { storage.setCookies(cookies, for: url, mainDocumentURL: nil) }
  }

  /// The request FoundationNetworking would propose for a redirect response, or `nil` if the
  /// response is not one it would ask about (no `Location`, or not a 301-303, 307 or 308).
  private func redirection(_ response: HTTPURLResponse) -> URLRequest? {
    let method = request.httpMethod ?? "GET"
    let proposedMethod: String
    switch response.statusCode {
    case 301, 302: proposedMethod = method.uppercased() == "POST" ? "GET" : method
    case 303: proposedMethod = method.uppercased() == "HEAD" ? "HEAD" : "GET"
    case 307, 308: proposedMethod = method
    default: return nil
    }
    guard let location = response.value(forHTTPHeaderField: "Location"),
      let target = URL(string: location, relativeTo: response.url)?.absoluteURL
    else { return nil }
    var proposed = request
    proposed.url = target
    proposed.httpMethod = proposedMethod
    return proposed
  }
}
