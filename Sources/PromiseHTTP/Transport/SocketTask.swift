import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A task of the socket transport: one request over a kept-alive connection of the client's
/// pool or a new one, read on a thread of its own (`SocketThreads`), its events fed to its `Exchange` as the
/// session delegate feeds a data task's.
///
/// Why it exists: FoundationNetworking crashes on legal responses (trailers after a chunked
/// body), accepts malformed ones, misses deadlines, and hands a body over in 16 KiB pieces,
/// each an operation queued without limit, which holds a large download to about half of
/// curl's throughput and lets its backlog grow by hundreds of MiB (Docs/Performance.md
/// "Transfers"). This task reads the socket and hands each piece to the sink on the same
/// thread: the sink's writes hold the reads back, so memory stays flat, and nothing is queued.
///
/// The events match a data task's: a redirect question (never answered with a request: a hop
/// the exchange follows gets a task of its own, `followsRedirects` is false), the response head,
/// the body, the completion with a `URLError` of the code FoundationNetworking gives the same
/// fault. Cookies are read from and stored to the session's storage. An ordinary request asks
/// for `gzip, deflate, br` and has its body decoded (`ContentDecoder`); a transfer asks for
/// `identity` unless the request names an `Accept-Encoding`, and passes on a body sent with a
/// `Content-Encoding` as it arrives, undecoded.
///
/// The connection goes back to the pool (`SocketConnectionPool`) only when the exchange ended
/// cleanly: the request sent whole, the response read to its framed end with nothing after it,
/// neither side asking to close. A request whose kept-alive connection turns out closed before
/// a byte of the answer goes again, once, on a new connection when it is idempotent or nothing
/// of its body was sent.
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
  /// Whether the body is decoded from its `Content-Encoding` (gzip, deflate) as it arrives:
  /// for ordinary requests, as FoundationNetworking decodes; a transfer's is passed on as sent.
  private let decodesContent: Bool
  private let phase = LockedBox(Phase.idle)
  private let exchange = LockedBox<Exchange?>(nil)
  /// The size of the buffer a read fills: bigger than the socket's default receive buffer, so
  /// that a read takes whatever has arrived.
  static let bufferSize = 256 * 1024

  init(
    _ request: URLRequest, body: UploadTaskBody? = nil, settings: SocketTransportSettings,
    refusal: URLError? = nil, decodesContent: Bool = false
  ) {
    self.request = request
    self.decodesContent = decodesContent
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
    SocketThreads.shared.run { [self] in run(exchange) }
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
    var kept: Keep?
    do {
      kept = try transfer(exchange, response: &response)
    } catch {
      failure = error
    }
    let connection: SocketConnection? = phase.withLock { phase in
      defer { phase = .stopped }
      if case .running(let connection) = phase { return connection }
      failure = URLError(.cancelled)
      return nil
    }
    // Back to the pool before the exchange completes, so that a request the completion sends
    // to the same origin finds it.
    if let connection {
      if let kept, failure == nil, kept.connection === connection {
        settings.pool.put(connection, for: kept.key, keepFor: kept.keepFor)
      } else {
        connection.close()
      }
    }
    self.exchange.withLock { $0 = nil }
    exchange.complete(error: failure, taskResponse: response)
  }

  /// A connection whose exchange ended cleanly, to keep for the next request to `key`.
  private struct Keep {
    let connection: SocketConnection
    let key: SocketConnectionPool.Key
    /// How long the server said it keeps the connection (`Keep-Alive: timeout=N`), if it did.
    let keepFor: TimeInterval?
  }

  /// How one attempt over one connection ended, when it did not throw.
  private enum Attempt {
    /// The exchange is done; the connection may carry another one if `keep` is set.
    case done(keep: Keep?)
    /// A kept-alive connection turned out closed by the server before it answered, and the
    /// request may go again on a new connection.
    case stale(URLError)
  }

  private func transfer(_ exchange: Exchange, response: inout HTTPURLResponse?) throws(URLError) -> Keep? {
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
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 1)
    defer { buffer.deallocate() }
    let head = requestHead(url: url, host: host, port: port, defaultPort: defaultPort, body: outgoing)
    let key = SocketConnectionPool.Key(scheme: secure ? "https" : "http", host: host.lowercased(), port: port)
    var mayReuse = true
    while true {
      let (connection, reused) = try open(
        key, host: host, port: port, tls: tlsContext, timeout: timeout, mayReuse: mayReuse)
      switch try attempt(
        exchange, over: connection, reused: reused, key: key, head: head, outgoing: outgoing, buffer: buffer,
        url: url, response: &response)
      {
      case .done(let keep):
        return keep
      case .stale:
        // Once: the next connection is a new one.
        mayReuse = false
        connection.close()
      }
    }
  }

  /// A kept-alive connection to `key` from the pool, or a new one; the task's from then on, so
  /// that `cancel()` (the request's deadline, too) stops the set-up at once instead of leaving
  /// the thread and its socket to an idle timeout.
  private func open(
    _ key: SocketConnectionPool.Key, host: String, port: Int, tls: TLSContext?, timeout: TimeInterval,
    mayReuse: Bool
  ) throws(URLError) -> (SocketConnection, reused: Bool) {
    let pooled = mayReuse && !closesConnection ? settings.pool.take(key) : nil
    pooled?.use(idleTimeout: timeout)
    let connection = pooled ?? SocketConnection(idleTimeout: timeout)
    let started = phase.withLock { phase in
      guard case .running = phase else { return false }
      phase = .running(connection)
      return true
    }
    guard started else {
      connection.close()
      throw URLError(.cancelled)
    }
    if pooled != nil { return (connection, true) }
    settings.pool.noteOpened()
    try connection.connect(host: host, port: port)
    if let tls { try connection.startTLS(host: host, context: tls) }
    return (connection, false)
  }

  /// Whether the request itself asks for the connection to close after it.
  private var closesConnection: Bool {
    guard let value = request.value(forHTTPHeaderField: "Connection") else { return false }
    return Self.hasToken(value, "close")
  }

  /// Whether the comma-separated `list` has `token` (compared as ASCII, case-insensitively).
  private static func hasToken(_ list: String, _ token: String) -> Bool {
    list.utf8.split(separator: UInt8(ascii: ",")).contains {
      FieldSyntax.equalsIgnoringASCIICase(
        String(decoding: FieldSyntax.trimmingWhitespace($0), as: UTF8.self), token)
    }
  }

  /// Whether the request may go again after a kept-alive connection failed before a byte of
  /// the response: it is idempotent and its body can be sent again, or nothing of its body was
  /// sent.
  private func mayRepeat(bodySent: Bool) -> Bool {
    if !bodySent { return true }
    let method = (request.httpMethod ?? "GET").uppercased()
    return body == nil && ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"].contains(method)
  }

  /// Sends the request over `connection` and reads the response into the exchange.
  private func attempt(
    _ exchange: Exchange, over connection: SocketConnection, reused: Bool, key: SocketConnectionPool.Key,
    head: [UInt8], outgoing: SocketOutgoingBody, buffer: UnsafeMutableRawBufferPointer, url: URL,
    response: inout HTTPURLResponse?
  ) throws(URLError) -> Attempt {
    do {
      try connection.send(contentsOf: head)
    } catch  where reused && error.code == .networkConnectionLost {
      // Closed while idle: the server cannot have acted on part of a head.
      return .stale(error)
    }
    // A server may answer before it has read the whole body (a 413, say) and close: the answer
    // is then what the task delivers, not the failed send. One that closes without answering
    // is an empty reply, whichever side saw it first (`SocketExchangeEnding`).
    var ending = SocketExchangeEnding()
    var bodySent = false
    do {
      try outgoing.send(over: connection, buffer: buffer) {
        if $0 > 0 { bodySent = true }
        exchange.sent(totalBytes: $0)
      }
    } catch  where error.code == .networkConnectionLost {
      ending.sendFailed(error)
    }
    var reader = SocketResponseReader(connection: connection, buffer: buffer)
    let responseHead: HTTP1ResponseHead
    do {
      responseHead = try reader.readHead()
    } catch {
      if reused, !reader.receivedAny, error.code == .networkConnectionLost, !connection.isStopped,
        mayRepeat(bodySent: bodySent)
      {
        return .stale(error)
      }
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
    // Kept only if the whole request went out, the server did not say it closes, and the body
    // is framed (not read until the server closes).
    let keepable =
      ending.error == nil && outgoing.framing != .untilClose && !closesConnection
      && Self.isPersistent(responseHead) && framing != .untilClose
    func keep() -> Keep? {
      guard keepable, !reader.hasBytesAfterBody, !connection.isStopped else { return nil }
      return Keep(connection: connection, key: key, keepFor: Self.keepAliveTimeout(responseHead))
    }
    if let proposed = redirection(http) {
      var withheld = true
      exchange.redirect(http, to: proposed, taskFollowsRedirects: false) { _ in withheld = false }
      // Withheld: the exchange is being cancelled; its stop ends this thread.
      if withheld { throw URLError(.cancelled) }
      // The exchange follows the hop with a task of its own, or refused it and has ended: the
      // 3xx's body is nobody's, and is not read (it could be long, or endless); the connection
      // goes on only if there is none.
      if !exchange.isReceiving {
        return .done(keep: framing == .none || framing == .length(0) ? keep() : nil)
      }
    }
    guard exchange.receive(http) == .allow else { throw URLError(.cancelled) }
    response = http
    // Ordinary requests get the body decoded, as FoundationNetworking decodes it; transfers get
    // it as sent.
    let decoder =
      decodesContent
      ? try ContentDecoder(ContentCoding.parse(responseHead.values(of: "Content-Encoding")) ?? []) : nil
    func deliver(_ bytes: UnsafeRawBufferPointer) throws(URLError) {
      exchange.append(Data(bytes), mayWait: true)
      // Refused (past the size limit, say): the exchange stopped the task; no more is decoded.
      if connection.isStopped { throw URLError(.cancelled) }
    }
    try reader.readBody(framing) { bytes throws(URLError) in
      if let decoder { try decoder.decode(bytes, emit: deliver) } else { try deliver(bytes) }
    }
    try decoder?.finish()
    return .done(keep: keep())
  }

  /// Whether the server keeps the connection open after `head`: HTTP/1.1 unless it says
  /// `close`, HTTP/1.0 only if it says `keep-alive`.
  private static func isPersistent(_ head: HTTP1ResponseHead) -> Bool {
    let connection = head.values(of: "Connection").joined(separator: ",")
    if hasToken(connection, "close") { return false }
    if head.version == "HTTP/1.1" { return true }
    return hasToken(connection, "keep-alive")
  }

  /// How long the server keeps an idle connection, less a second, when it says so
  /// (`Keep-Alive: timeout=5`); `nil` when it does not.
  private static func keepAliveTimeout(_ head: HTTP1ResponseHead) -> TimeInterval? {
    for value in head.values(of: "Keep-Alive") {
      for element in value.utf8.split(separator: UInt8(ascii: ",")) {
        let parameter = String(decoding: FieldSyntax.trimmingWhitespace(element), as: UTF8.self)
        let parts = parameter.split(separator: "=", maxSplits: 1)
        guard parts.count == 2, FieldSyntax.equalsIgnoringASCIICase(String(parts[0]), "timeout"),
          let seconds = Int(parts[1].trimmingCharacters(in: .whitespaces))
        else { continue }
        return TimeInterval(max(0, seconds - 1))
      }
    }
    return nil
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
    // An ordinary request asks for what it decodes, as FoundationNetworking does; a transfer
    // asks for none, and a request that names its own encodings gets them.
    if !names.contains("accept-encoding") {
      let accepted = decodesContent ? ContentDecoder.acceptedCodings : nil
      fields.append(("Accept-Encoding", accepted ?? "identity"))
    }
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
