import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What the socket transport needs of a client's session configuration, read once.
struct SocketTransportSettings: Sendable {
  /// Whether the socket transport may serve a client's transfers at all: no proxy in the
  /// session's configuration, no protocol class of the caller's, and not turned off.
  var isAvailable: Bool
  /// `URLSessionConfiguration.httpAdditionalHeaders`, sent unless the request sets the field.
  var additionalHeaders: [(name: String, value: String)]
  /// Where cookies come from and go to, as FoundationNetworking would use them; `nil` for none.
  var cookieStorage: HTTPCookieStorage?
  /// Whether responses' cookies are stored (the storage's accept policy is not `.never`).
  var acceptsCookies: Bool
  /// The hosts libcurl reaches without the environment's proxy (`no_proxy`), when the
  /// environment names one; `nil` when it names none.
  var proxyExemptions: [String]?

  init(
    configuration: URLSessionConfiguration, enabled: Bool,
    environment: [String: String] = ProcessInfo.processInfo.environment
  ) {
    additionalHeaders = (configuration.httpAdditionalHeaders ?? [:]).compactMap { name, value in
      guard let name = name as? String else { return nil }
      return (name, "\(value)")
    }
    cookieStorage = configuration.httpShouldSetCookies ? configuration.httpCookieStorage : nil
    acceptsCookies = configuration.httpCookieAcceptPolicy != .never
    isAvailable = enabled && Self.canServe(configuration)
    // libcurl honours these for plain HTTP; `no_proxy` exempts hosts from them.
    let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"].contains {
      environment[$0]?.isEmpty == false
    }
    proxyExemptions =
      proxied
      ? (environment["no_proxy"] ?? environment["NO_PROXY"] ?? "").split(separator: ",")
        .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
      : nil
  }

  /// Whether libcurl would reach `host` without the environment's proxy: no proxy is named, or
  /// `no_proxy` is `*`, names the host, or a domain the host is in (`example.com` and
  /// `.example.com` both cover `api.example.com`).
  func bypassesProxy(_ host: String) -> Bool {
    guard let exemptions = proxyExemptions else { return true }
    let host = host.lowercased()
    return exemptions.contains { entry in
      if entry == "*" { return true }
      let domain = entry.hasPrefix(".") ? String(entry.dropFirst()) : entry
      return host == domain || host.hasSuffix("." + domain)
    }
  }

  /// Whether a session with `configuration` would reach a plain-HTTP server directly, without
  /// a proxy or a protocol class the socket transport would bypass.
  private static func canServe(_ configuration: URLSessionConfiguration) -> Bool {
    #if canImport(Glibc)
      if let proxies = configuration.connectionProxyDictionary, !proxies.isEmpty { return false }
      // Foundation's own protocol classes are named with a leading underscore
      // (`_HTTPURLProtocol`); any other was registered by the caller.
      let classes = configuration.protocolClasses ?? []
      return classes.allSatisfy { String(describing: $0).hasPrefix("_") }
    #else
      return false
    #endif
  }

  /// Whether the socket transport serves `request`.
  ///
  /// It serves plain HTTP to a host, with no credentials in the URL, no body other than
  /// `httpBody`, and header fields that are safe to write as they are. Anything else goes
  /// through `URLSession`.
  func serves(_ request: URLRequest) -> Bool {
    guard isAvailable, let url = request.url, url.scheme?.lowercased() == "http",
      let host = url.host, !host.isEmpty, bypassesProxy(host), url.user == nil, url.password == nil,
      request.httpBodyStream == nil
    else { return false }
    let method = request.httpMethod ?? "GET"
    guard method.utf8.allSatisfy(Self.isTokenByte), method.uppercased() != "CONNECT" else { return false }
    for (name, value) in request.allHTTPHeaderFields ?? [:] where !Self.isSafeField(name, value) {
      return false
    }
    return true
  }

  /// Whether a field with `name` and `value` can be written into a request head as it is: a
  /// token for a name, and no CR, LF or NUL in the value.
  static func isSafeField(_ name: String, _ value: String) -> Bool {
    !name.isEmpty && name.utf8.allSatisfy(isTokenByte)
      && !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 })
  }

  /// Whether `byte` may appear in a method or a field name (RFC 9110 §5.6.2 `tchar`).
  private static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"):
      true
    default:
      "!#$%&'*+-.^_`|~".utf8.contains(byte)
    }
  }
}

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
  private let phase = LockedBox(Phase.idle)
  private let exchange = LockedBox<Exchange?>(nil)
  /// The size of the buffer a read fills: bigger than the socket's default receive buffer, so
  /// that a read takes whatever has arrived.
  static let bufferSize = 256 * 1024

  init(_ request: URLRequest, body: UploadTaskBody? = nil, settings: SocketTransportSettings) {
    self.request = request
    self.body = body
    self.settings = settings
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
    guard let url = request.url, var host = url.host else { throw URLError(.badURL) }
    // An IPv6 literal, with or without its brackets depending on the platform's `URL`.
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    let port = url.port ?? 80
    let timeout = request.timeoutInterval > 0 ? request.timeoutInterval : 60
    // A body that cannot be sent (a stream of chunks read already) fails before connecting.
    let outgoing = try OutgoingBody(body, request: request)
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
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 1)
    defer { buffer.deallocate() }
    let head = requestHead(url: url, host: host, port: port, body: outgoing)
    try connection.send(contentsOf: head)
    // A server may answer before it has read the whole body (a 413, say) and close: the answer
    // is then what the task delivers, not the failed send.
    var sendFailure: URLError?
    do {
      try outgoing.send(over: connection, buffer: buffer) { exchange.sent(totalBytes: $0) }
    } catch  where error.code == .networkConnectionLost {
      sendFailure = error
    }
    var reader = Reader(connection: connection, buffer: buffer)
    let responseHead: HTTP1ResponseHead
    do {
      responseHead = try reader.readHead()
    } catch {
      throw sendFailure ?? error
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
  private func requestHead(url: URL, host: String, port: Int, body: OutgoingBody) -> [UInt8] {
    let method = request.httpMethod ?? "GET"
    var target = url.path(percentEncoded: true)
    if target.isEmpty { target = "/" }
    if let query = url.query(percentEncoded: true) { target += "?" + query }
    let hostField = host.contains(":") ? "[\(host)]" : host
    var fields: [(String, String)] = [("Host", port == 80 ? hostField : "\(hostField):\(port)")]
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

/// The body a socket task sends, and how it is framed.
private struct OutgoingBody {
  private enum Source {
    case data(Data)
    case file(FileHandle)
    case stream(InputStream)
    /// Chunks taken from a sequence as it yields them.
    case live(any SequentialUploadBody)
  }
  private let source: Source
  /// `.length` with the body's size, or `.chunked` for a stream of unknown length.
  let framing: HTTP1BodyFraming

  /// The body of `request`: `body` if given (a file, read here; a stream, sent chunked unless
  /// the request declares its length), else the request's `httpBody`.
  init(_ body: UploadTaskBody?, request: URLRequest) throws(URLError) {
    switch body {
    case nil:
      let data = request.httpBody ?? Data()
      source = .data(data)
      framing = .length(Int64(data.count))
    case .file(let url):
      guard let handle = try? FileHandle(forReadingFrom: url), let size = try? handle.seekToEnd(),
        (try? handle.seek(toOffset: 0)) != nil
      else {
        throw URLError(
          .cannotOpenFile, userInfo: [NSLocalizedDescriptionKey: "Could not read the file to upload"])
      }
      source = .file(handle)
      framing = .length(Int64(size))
    case .stream(let live as any SequentialUploadBody):
      guard !live.isStopped else {
        throw URLError(.cannotOpenFile, userInfo: [NSLocalizedDescriptionKey: "The stream of chunks stopped"])
      }
      source = .live(live)
      framing = live.length.map { .length($0) } ?? .chunked
    case .stream(let stream):
      // A stream's length is not known before its end (a form with files): sent chunked, as
      // FoundationNetworking sends it.
      let input = stream.makeInputStream()
      input.open()
      source = .stream(input)
      framing = .chunked
    }
  }

  /// Sends the body through `buffer`, reporting the bytes sent so far after each piece.
  func send(
    over connection: SocketConnection, buffer: UnsafeMutableRawBufferPointer, sent: (Int64) -> Void
  ) throws(URLError) {
    defer {
      switch source {
      case .file(let handle): try? handle.close()
      case .stream(let input): input.close()
      case .data, .live: break
      }
    }
    switch source {
    case .data(let data):
      guard !data.isEmpty else { return }
      try connection.send(contentsOf: data) { sent(0) }
      sent(Int64(data.count))
    case .file(let handle):
      guard case .length(let length) = framing else { return }
      var total: Int64 = 0
      while total < length {
        let want = Int(min(Int64(buffer.count), length - total))
        let count = read(handle.fileDescriptor, buffer.baseAddress!, want)
        if count < 0, errno == EINTR { continue }
        guard count > 0 else {
          throw URLError(
            .cannotOpenFile,
            userInfo: [NSLocalizedDescriptionKey: "The file to upload ended early or could not be read"])
        }
        let before = total
        try connection.send(UnsafeRawBufferPointer(rebasing: buffer[..<count])) { sent(before) }
        total += Int64(count)
        sent(total)
      }
    case .stream(let input):
      try send(input, over: connection, buffer: buffer, sent: sent)
    case .live(let live):
      try send(live, over: connection, sent: sent)
    }
  }

  /// Sends the chunks of `live` as the sequence yields them: with `Content-Length` when its
  /// length is known (a total that differs fails the upload), else in chunked coding.
  private func send(
    _ live: any SequentialUploadBody, over connection: SocketConnection, sent: (Int64) -> Void
  ) throws(URLError) {
    var total: Int64 = 0
    let stopped = URLError(
      .cannotOpenFile, userInfo: [NSLocalizedDescriptionKey: "The stream of chunks stopped"])
    func mismatch() -> URLError {
      let length = live.length ?? 0
      let yielded = total > length ? "more than \(length) bytes" : "\(total) bytes, not the \(length)"
      live.stop(with: .invalidRequest("the stream of chunks yielded \(yielded) of its length"))
      return stopped
    }
    while true {
      switch live.next() {
      case .stopped:
        throw stopped
      case .end:
        if let length = live.length {
          guard total == length else { throw mismatch() }
        } else {
          try connection.send(contentsOf: Array("0\r\n\r\n".utf8))
        }
        return
      case .chunk(let chunk):
        let before = total
        total += Int64(chunk.count)
        if let length = live.length {
          guard total <= length else { throw mismatch() }
          try connection.send(contentsOf: chunk) { sent(before) }
        } else {
          try connection.send(contentsOf: Array("\(String(chunk.count, radix: 16))\r\n".utf8))
          try connection.send(contentsOf: chunk) { sent(before) }
          try connection.send(contentsOf: Array("\r\n".utf8))
        }
        sent(total)
      }
    }
  }

  /// Sends what `input` reads, in chunks if the framing is chunked.
  private func send(
    _ input: InputStream, over connection: SocketConnection, buffer: UnsafeMutableRawBufferPointer,
    sent: (Int64) -> Void
  ) throws(URLError) {
    let chunked = framing == .chunked
    // Room before the data for a chunk's size line ("3fff0\r\n") and after it for "\r\n".
    let offset = chunked ? 16 : 0
    let room = buffer.count - offset - 2
    let data = buffer.baseAddress!.advanced(by: offset).assumingMemoryBound(to: UInt8.self)
    var total: Int64 = 0
    while true {
      let count = input.read(data, maxLength: room)
      guard count >= 0 else {
        throw URLError(.cannotOpenFile, userInfo: [NSLocalizedDescriptionKey: "The body stream failed"])
      }
      if count == 0 { break }
      if chunked {
        let line = Array("\(String(count, radix: 16))\r\n".utf8)
        let start = offset - line.count
        UnsafeMutableRawBufferPointer(rebasing: buffer[start..<offset]).copyBytes(from: line)
        buffer[offset + count] = 0x0D
        buffer[offset + count + 1] = 0x0A
        try connection.send(UnsafeRawBufferPointer(rebasing: buffer[start..<offset + count + 2])) {
          sent(total)
        }
      } else {
        try connection.send(UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])) { sent(total) }
      }
      total += Int64(count)
      sent(total)
    }
    if chunked { try connection.send(contentsOf: Array("0\r\n\r\n".utf8)) }
  }
}

/// Reads a response from a connection through one buffer: the head, then the body.
private struct Reader {
  let connection: SocketConnection
  let buffer: UnsafeMutableRawBufferPointer
  /// The bytes in `buffer` read but not consumed: `start..<end`.
  var start = 0
  var end = 0

  init(connection: SocketConnection, buffer: UnsafeMutableRawBufferPointer) {
    self.connection = connection
    self.buffer = buffer
  }

  /// Reads more bytes after the unconsumed ones (moved to the front first); returns how many
  /// arrived, 0 at the end of the stream.
  mutating func fill() throws(URLError) -> Int {
    if start > 0 {
      if end > start {
        buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: end - start)
      }
      end -= start
      start = 0
    }
    guard end < buffer.count else { return 0 }
    let count = try connection.receive(into: UnsafeMutableRawBufferPointer(rebasing: buffer[end...]))
    end += count
    return count
  }

  var unconsumed: UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(rebasing: buffer[start..<end])
  }

  /// Reads the head of the final response, skipping interim (1xx) ones.
  mutating func readHead() throws(URLError) -> HTTP1ResponseHead {
    // A server that sends interim responses without end would keep the task reading: bytes keep
    // arriving, so no idle timeout ends it.
    for _ in 0...Self.maximumInterimResponses {
      var scanned = 0
      while true {
        // Only the bytes that arrived since the last look are scanned (less the three a line
        // end may straddle): a head arriving a byte at a time costs linear time, not quadratic.
        let from = max(0, scanned - 3)
        if let found = HTTP1ResponseHead.end(in: UnsafeRawBufferPointer(rebasing: unconsumed[from...])) {
          let length = from + found
          // A long head that arrived in one read is refused too, not only one still arriving.
          guard length <= HTTP1ResponseHead.maximumSize else { throw Self.headTooLong }
          let head = try HTTP1ResponseHead.parse(UnsafeRawBufferPointer(rebasing: unconsumed[..<length]))
          start += length
          guard (100..<200).contains(head.statusCode) else { return head }
          // 101 would switch protocols: nothing this transport asks for.
          guard head.statusCode != 101 else { throw URLError(.cannotParseResponse) }
          break
        }
        scanned = end - start
        guard scanned < HTTP1ResponseHead.maximumSize else { throw Self.headTooLong }
        guard try fill() > 0 else {
          throw URLError(
            scanned == 0 ? .networkConnectionLost : .cannotParseResponse,
            userInfo: [
              NSLocalizedDescriptionKey: scanned == 0
                ? "Empty reply from server" : "The connection closed in the middle of the response head"
            ])
        }
      }
    }
    throw URLError(
      .cannotParseResponse,
      userInfo: [
        NSLocalizedDescriptionKey: "More than \(Self.maximumInterimResponses) interim (1xx) responses"
      ])
  }

  /// The most interim (1xx) responses read before the final one.
  static let maximumInterimResponses = 16

  /// Reads the body framed as `framing`, passing its bytes to `emit` as they arrive.
  mutating func readBody(
    _ framing: HTTP1BodyFraming, emit: (UnsafeRawBufferPointer) -> Void
  ) throws(URLError) {
    switch framing {
    case .none:
      return
    case .length(var remaining):
      while remaining > 0 {
        if start == end {
          start = 0
          end = 0
          guard try fill() > 0 else { throw Self.closedEarly(remaining: remaining) }
        }
        let count = Int(min(Int64(end - start), remaining))
        emit(UnsafeRawBufferPointer(rebasing: buffer[start..<start + count]))
        start += count
        remaining -= Int64(count)
      }
    case .chunked:
      var decoder = HTTP1ChunkedDecoder()
      while true {
        if start < end {
          start += try decoder.decode(unconsumed, emit: emit)
          if decoder.isDone { return }
        }
        start = 0
        end = 0
        guard try fill() > 0 else {
          throw URLError(
            .networkConnectionLost,
            userInfo: [NSLocalizedDescriptionKey: "transfer closed with outstanding read data remaining"])
        }
      }
    case .untilClose:
      while true {
        if start < end {
          emit(unconsumed)
        }
        start = 0
        end = 0
        guard try fill() > 0 else { return }
      }
    }
  }

  private static var headTooLong: URLError {
    URLError(
      .cannotParseResponse,
      userInfo: [
        NSLocalizedDescriptionKey: "The response head is longer than \(HTTP1ResponseHead.maximumSize) bytes"
      ])
  }

  private static func closedEarly(remaining: Int64) -> URLError {
    URLError(
      .networkConnectionLost,
      userInfo: [NSLocalizedDescriptionKey: "transfer closed with \(remaining) bytes remaining to read"])
  }
}
