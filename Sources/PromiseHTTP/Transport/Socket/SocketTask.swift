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
/// for `gzip, deflate, br, zstd` and has its body decoded (`ContentDecoder`); a transfer asks for
/// `identity` unless the request names an `Accept-Encoding`, and passes on a body sent with a
/// `Content-Encoding` as it arrives, undecoded.
///
/// The wire logic is the connection's `HTTP1ConnectionStateMachine`: this task is its driver,
/// doing the blocking I/O the machine asks for and feeding back what happened. The connection
/// goes back to the pool (`SocketConnectionPool`), with its machine, only when the machine says
/// the exchange ended cleanly: the request sent whole, the response read to its framed end with
/// nothing after it, neither side asking to close. A request whose kept-alive connection turns
/// out closed before a byte of the answer goes again, once, on a new connection when it is
/// idempotent or nothing of its body was sent.
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
        settings.pool.put(connection, machine: kept.machine, for: kept.key, keepFor: kept.keepFor)
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
    /// The connection's machine, idle.
    let machine: HTTP1ConnectionStateMachine
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
    // A plain-HTTP request through an HTTP proxy goes to it with its absolute URL; HTTPS, and
    // anything through a SOCKS5 proxy, goes through a tunnel (`open`), and the server sees the
    // request as if it came directly.
    let route = settings.route(scheme: secure ? "https" : "http", host: host)
    var forwardingProxy: SocketTransportSettings.Proxy?
    if !secure, case .proxy(let proxy) = route, proxy.socks == nil { forwardingProxy = proxy }
    let head = requestHead(
      url: url, host: host, port: port, defaultPort: defaultPort, body: outgoing, proxy: forwardingProxy)
    let key = SocketConnectionPool.Key(scheme: secure ? "https" : "http", host: host.lowercased(), port: port)
    let wire = HTTP1ConnectionStateMachine.Request(
      head: head, method: request.httpMethod ?? "GET", bodyFraming: outgoing.framing,
      closesConnection: closesConnection, isRepeatable: isRepeatable)
    var mayReuse = true
    while true {
      var (connection, machine) = try open(
        key, host: host, port: port, route: route, tls: tlsContext, timeout: timeout, mayReuse: mayReuse,
        buffer: buffer)
      switch try attempt(
        exchange, over: connection, machine: &machine, key: key, request: wire, outgoing: outgoing,
        buffer: buffer, url: url, response: &response)
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

  /// A kept-alive connection to `key` from the pool, or a new one, with its machine; the task's
  /// from then on, so that `cancel()` (the request's deadline, too) stops the set-up at once
  /// instead of leaving the thread and its socket to an idle timeout.
  ///
  /// Through a proxy (`route`), a new connection goes to the proxy; through a SOCKS5 proxy, a
  /// tunnel to `host` is opened first, and through an HTTP proxy, a `CONNECT` tunnel for HTTPS
  /// (`buffer` holds the proxy's answer); TLS runs through the tunnel.
  private func open(
    _ key: SocketConnectionPool.Key, host: String, port: Int, route: SocketTransportSettings.Route,
    tls: TLSContext?, timeout: TimeInterval, mayReuse: Bool, buffer: UnsafeMutableRawBufferPointer
  ) throws(URLError) -> (SocketConnection, HTTP1ConnectionStateMachine) {
    let pooled = mayReuse && !closesConnection ? settings.pool.take(key) : nil
    pooled?.connection.use(idleTimeout: timeout)
    let connection = pooled?.connection ?? SocketConnection(idleTimeout: timeout)
    let started = phase.withLock { phase in
      guard case .running = phase else { return false }
      phase = .running(connection)
      return true
    }
    guard started else {
      connection.close()
      throw URLError(.cancelled)
    }
    if let pooled { return (connection, pooled.machine) }
    settings.pool.noteOpened()
    if case .proxy(let proxy) = route {
      try connection.connect(host: proxy.host, port: proxy.port)
      if let socks = proxy.socks {
        try socksTunnel(over: connection, through: proxy, socks, to: host, port: port)
      } else if tls != nil {
        try tunnel(over: connection, through: proxy, to: host, port: port, buffer: buffer)
      }
    } else {
      try connection.connect(host: host, port: port)
    }
    if let tls { try connection.startTLS(host: host, context: tls) }
    return (connection, HTTP1ConnectionStateMachine())
  }

  /// Asks the proxy at the other end of `connection` for a tunnel to `host:port` (`CONNECT`,
  /// RFC 9110 §9.3.6) and reads its answer into `buffer`: a 2xx opens the tunnel, anything else
  /// fails the request, as libcurl's "CONNECT tunnel failed".
  ///
  /// - Throws: `URLError` `.userAuthenticationRequired` for a 407 (the proxy wants credentials,
  ///   in the proxy URL's `user:password@`), `.cannotConnectToHost` for any other refusal (a 502
  ///   when the proxy cannot reach the server) or a proxy that closes without answering,
  ///   `.cannotParseResponse` for an answer that is not HTTP/1.x or has bytes after its head.
  private func tunnel(
    over connection: SocketConnection, through proxy: SocketTransportSettings.Proxy, to host: String,
    port: Int,
    buffer: UnsafeMutableRawBufferPointer
  ) throws(URLError) {
    let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    var text = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
    if let authorization = proxy.authorization { text += "Proxy-Authorization: \(authorization)\r\n" }
    text += "User-Agent: PromiseHTTP\r\n\r\n"
    try connection.send(contentsOf: Array(text.utf8))
    func failure(_ code: URLError.Code, _ what: String) -> URLError {
      URLError(
        code, userInfo: [NSLocalizedDescriptionKey: "\(what) (proxy \(proxy.name), tunnel to \(authority))"])
    }
    var filled = 0
    while true {
      guard filled < buffer.count else {
        throw failure(.cannotParseResponse, "The proxy's answer to CONNECT is too long")
      }
      let count = try connection.receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
      guard count > 0 else {
        throw failure(.cannotConnectToHost, "The proxy closed the connection before it answered CONNECT")
      }
      filled += count
      let received = UnsafeRawBufferPointer(rebasing: buffer[..<filled])
      guard let end = HTTP1ResponseHead.end(in: received) else { continue }
      let answer: HTTP1ResponseHead
      do {
        answer = try HTTP1ResponseHead.parse(UnsafeRawBufferPointer(rebasing: received[..<end]))
      } catch {
        throw failure(.cannotParseResponse, "The proxy's answer to CONNECT is not HTTP/1.x")
      }
      guard (200..<300).contains(answer.statusCode) else {
        throw failure(
          answer.statusCode == 407 ? .userAuthenticationRequired : .cannotConnectToHost,
          "CONNECT tunnel failed, response \(answer.statusCode)")
      }
      // TLS starts with the client's hello: a proxy that sends anything before it is broken.
      guard end == filled else {
        throw failure(.cannotParseResponse, "The proxy sent bytes after its answer to CONNECT")
      }
      return
    }
  }

  /// Asks the SOCKS5 proxy at the other end of `connection` for a tunnel to `host:port`
  /// (RFC 1928, with RFC 1929's user name and password when the proxy's URL has them).
  ///
  /// Reads exactly the bytes of each answer, so that nothing the server sends later is taken
  /// for the proxy's. With `socks5://` the name is resolved here and the address sent, as
  /// libcurl does; with `socks5h://` the proxy resolves it.
  ///
  /// - Throws: `URLError` `.userAuthenticationRequired` when the proxy wants credentials or
  ///   rejects them, `.cannotConnectToHost` when it cannot or will not connect (with RFC 1928's
  ///   reason) or closes without answering, `.cannotFindHost` when the name does not resolve here
  ///   (`socks5://`), `.cannotParseResponse` for answers that are not SOCKS5.
  private func socksTunnel(
    over connection: SocketConnection, through proxy: SocketTransportSettings.Proxy,
    _ socks: SocketTransportSettings.Proxy.SOCKS, to host: String, port: Int
  ) throws(URLError) {
    let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    func named(_ error: URLError) -> URLError {
      let text = "\(error.localizedDescription) (proxy \(proxy.name), tunnel to \(authority))"
      return URLError(error.code, userInfo: [NSLocalizedDescriptionKey: text])
    }
    func read(_ count: Int) throws(URLError) -> [UInt8] {
      let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 1)
      defer { bytes.deallocate() }
      var filled = 0
      while filled < count {
        let received = try connection.receive(into: UnsafeMutableRawBufferPointer(rebasing: bytes[filled...]))
        guard received > 0 else {
          throw URLError(
            .cannotConnectToHost,
            userInfo: [
              NSLocalizedDescriptionKey: "The SOCKS5 proxy closed the connection during the handshake"
            ])
        }
        filled += received
      }
      return Array(bytes)
    }
    do throws(URLError) {
      let credentials = socks.credentials
      try connection.send(contentsOf: SOCKS5.greeting(offeringPassword: credentials != nil))
      let method = try SOCKS5.chosenMethod(read(2), offeredPassword: credentials != nil)
      if method == .password, let credentials {
        try connection.send(
          contentsOf: SOCKS5.credentials(user: credentials.user, password: credentials.password))
        try SOCKS5.checkCredentialsVerdict(read(2))
      }
      let destination: SOCKS5.Destination
      if let address = SocketConnection.addressBytes(ofLiteral: host) {
        destination = .address(address)
      } else if socks.proxyResolves, host.utf8.count <= 255 {
        // A longer name does not fit SOCKS5's length byte: resolved here, as libcurl does.
        destination = .name(host)
      } else {
        destination = .address(try SocketConnection.addressBytes(resolving: host, port: port))
      }
      try connection.send(contentsOf: SOCKS5.connectRequest(to: destination, port: port))
      // A refusal says why in its second byte: checked before the rest is read.
      let prefix = try read(5)
      try SOCKS5.checkReply(prefix, destination: authority)
      _ = try read(SOCKS5.replyLength(prefix: prefix) - 5)
    } catch {
      // A stop or the idle timeout is the request's own; anything else names the proxy, and a
      // reset by it mid-handshake is a refusal like a close.
      if error.code == .cancelled || error.code == .timedOut { throw error }
      throw named(
        error.code == .networkConnectionLost
          ? URLError(.cannotConnectToHost, userInfo: error.userInfo) : error)
    }
  }

  /// Whether the request itself asks for the connection to close after it.
  private var closesConnection: Bool {
    guard let value = request.value(forHTTPHeaderField: "Connection") else { return false }
    return HTTP1ConnectionStateMachine.hasToken(value, "close")
  }

  /// Whether the request may go again after a kept-alive connection failed before a byte of
  /// the response even when some of its body was sent: it is idempotent and its body can be
  /// sent again. (With nothing of its body sent, it always may; the machine knows which.)
  private var isRepeatable: Bool {
    let method = (request.httpMethod ?? "GET").uppercased()
    return body == nil && ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"].contains(method)
  }

  /// Sends the request over `connection` and reads the response into the exchange: runs the
  /// actions of the connection's machine, and feeds it what the connection did.
  ///
  /// The bytes read and not consumed by the machine are `buffer[start..<end]`: only a head
  /// still arriving is left there; the body is handed on from the buffer as it is read.
  private func attempt(
    _ exchange: Exchange, over connection: SocketConnection, machine: inout HTTP1ConnectionStateMachine,
    key: SocketConnectionPool.Key, request wire: HTTP1ConnectionStateMachine.Request,
    outgoing: SocketOutgoingBody, buffer: UnsafeMutableRawBufferPointer, url: URL,
    response: inout HTTPURLResponse?
  ) throws(URLError) -> Attempt {
    var start = 0
    var end = 0
    /// Hands the unconsumed bytes to the machine, and drops those it consumed.
    func bytesRead() -> HTTP1ConnectionStateMachine.Action {
      let (action, consumed) = machine.bytesRead(UnsafeRawBufferPointer(rebasing: buffer[start..<end]))
      start += consumed
      return action
    }
    // Ordinary requests get the body decoded, as FoundationNetworking decodes it; transfers get
    // it as sent.
    var decoder: ContentDecoder?
    func deliver(_ bytes: UnsafeRawBufferPointer) throws(URLError) {
      exchange.append(Data(bytes), mayWait: true)
      // Refused (past the size limit, say): the exchange stopped the task; no more is decoded.
      if connection.isStopped { throw URLError(.cancelled) }
    }
    var action = machine.start(wire)
    while true {
      switch action {
      case .write(let head):
        do {
          try connection.send(contentsOf: head)
          action = machine.headWritten()
        } catch {
          action = machine.writeFailed(error)
        }
      case .sendBody:
        // A server may answer before it has read the whole body (a 413, say) and close: the
        // machine then reads the answer rather than report the failed send.
        do {
          try outgoing.send(over: connection, buffer: buffer) { total in
            machine.bodyBytesWritten(total)
            exchange.sent(totalBytes: total)
          }
          action = machine.bodySent()
        } catch {
          action = machine.writeFailed(error)
        }
      case .read:
        if start > 0 {
          if end > start {
            buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: end - start)
          }
          end -= start
          start = 0
        }
        do {
          let count = try connection.receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[end...]))
          end += count
          action = count > 0 ? bytesRead() : machine.peerClosed()
        } catch {
          // Stopped: the failure is the cancellation, whatever the read saw.
          action = connection.isStopped ? machine.cancel() : machine.readFailed(error)
        }
      case .deliverHead(let head, let framing):
        let http = HTTPURLResponse(
          url: url, statusCode: head.statusCode, httpVersion: head.version, headerFields: head.headerFields)!
        storeCookies(of: head, from: url)
        if case .failure(let error) = framing {
          response = http
          throw error
        }
        if let proposed = redirection(http) {
          var withheld = true
          exchange.redirect(http, to: proposed, taskFollowsRedirects: false) { _ in withheld = false }
          // Withheld: the exchange is being cancelled; its stop ends this thread.
          if withheld {
            action = machine.cancel()
            continue
          }
          // The exchange follows the hop with a task of its own, or refused it and has ended:
          // the 3xx's body is nobody's, and is not read (it could be long, or endless).
          if !exchange.isReceiving {
            action = machine.abandonBody()
            continue
          }
        }
        guard exchange.receive(http) == .allow else {
          action = machine.cancel()
          continue
        }
        response = http
        if decodesContent {
          decoder = try ContentDecoder(ContentCoding.parse(head.values(of: "Content-Encoding")) ?? [])
        }
        action = bytesRead()
      case .deliverBody(let bytes):
        if let decoder { try decoder.decode(bytes, emit: deliver) } else { try deliver(bytes) }
        action = bytesRead()
      case .finish(let keep, let keepFor):
        try decoder?.finish()
        return .done(
          keep: keep ? Keep(connection: connection, machine: machine, key: key, keepFor: keepFor) : nil)
      case .retry(let error):
        return .stale(error)
      case .fail(let error):
        throw error
      case .close:
        return .done(keep: nil)
      }
    }
  }

  /// The request line and header fields, as bytes.
  ///
  /// Through a forwarding `proxy` (plain HTTP), the target is the absolute URL (RFC 9112
  /// §3.2.2) and the proxy's credentials go in `Proxy-Authorization`.
  private func requestHead(
    url: URL, host: String, port: Int, defaultPort: Int, body: SocketOutgoingBody,
    proxy: SocketTransportSettings.Proxy? = nil
  ) -> [UInt8] {
    let method = request.httpMethod ?? "GET"
    var target = url.path(percentEncoded: true)
    if target.isEmpty { target = "/" }
    if let query = url.query(percentEncoded: true) { target += "?" + query }
    let hostField = host.contains(":") ? "[\(host)]" : host
    let authority = port == defaultPort ? hostField : "\(hostField):\(port)"
    if proxy != nil { target = "http://\(authority)\(target)" }
    var fields: [(String, String)] = [("Host", authority)]
    if let authorization = proxy?.authorization,
      request.value(forHTTPHeaderField: "Proxy-Authorization") == nil
    {
      fields.append(("Proxy-Authorization", authorization))
    }
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
