import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Serves one accepted TCP connection on its own thread: reads requests, asks the handler,
/// performs the action, until one side closes.
struct Connection: Sendable {
  let fd: Int32
  let host: String
  let port: Int
  let number: Int
  let state: ServerState
  let handler: @Sendable (RecordedRequest) -> ServerAction
  let bodyHandling: @Sendable (RecordedRequest) -> RequestBodyHandling

  /// How a connection ends.
  enum Ending {
    /// FIN after everything written.
    case close
    /// RST (`SO_LINGER` 0), dropping nothing the peer already received.
    case reset
  }

  /// Runs the request loop, then closes the socket.
  func run() {
    var parser = RequestParser(
      input: SocketInput(fd: fd), host: host, port: port, connectionNumber: number)
    finish(serve(&parser))
  }

  /// Answers requests until the connection must end; returns how to end it.
  private func serve(_ parser: inout RequestParser) -> Ending {
    while !state.isStopped {
      switch parser.nextHead() {
      case .closed:
        return .close
      case .malformed(let status, let message):
        return malformed(status: status, message: message)
      case .head(let head):
        if let ending = serve(head, handling: bodyHandling(parser.request(head)), parser: &parser) {
          return ending
        }
      }
    }
    return .close
  }

  /// Reads the body of one request as `handling` says and answers it; returns how to end the
  /// connection, or `nil` to keep it open.
  private func serve(_ head: RequestParser.Head, handling: RequestBodyHandling, parser: inout RequestParser)
    -> Ending?
  {
    let fd = self.fd
    let sendContinue = { Socket.send(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) }
    switch handling {
    case .buffer:
      switch parser.readBody(of: head, sendContinue: sendContinue) {
      case .closed:
        return .close
      case .malformed(let status, let message):
        return malformed(status: status, message: message)
      case .request(let request, let closeAfter):
        return answer(request, closeAfter: closeAfter)
      }

    case .consume(let path):
      var file: Int32?
      if let path {
        let opened = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard opened >= 0 else {
          return malformed(status: 500, message: "cannot create \(path): errno \(errno)")
        }
        file = opened
      }
      var checksum = ByteChecksum()
      var writeError: Int32 = 0
      let (count, end) = parser.consumeBody(of: head, sendContinue: sendContinue) { piece in
        checksum.update(piece)
        guard let file else { return true }
        if FileOutput.writeAll(file, piece) { return true }
        writeError = errno
        return false
      }
      if let file { _ = close(file) }
      let consumed = ConsumedBody(
        byteCount: count, checksum: checksum, savedPath: path, isComplete: end == .complete)
      switch end {
      case .complete, .limitReached:
        return answer(parser.request(head, consumedBody: consumed), closeAfter: head.closeAfter)
      case .streamEnded:
        state.record(parser.request(head, consumedBody: consumed))
        state.answering()
        return .close
      case .sinkFailed:
        state.record(parser.request(head, consumedBody: consumed))
        state.answering()
        return malformed(status: 500, message: "cannot write \(path ?? ""): errno \(writeError)")
      case .malformed(let status, let message):
        return malformed(status: status, message: message)
      }

    case .respondBeforeBody(let action):
      let request = parser.request(head)
      state.record(request)
      if case .slowHeaders = action {} else { state.answering() }
      // The unread body makes the connection unusable for another request.
      let unread = head.framing != .none
      return perform(action, request: request, closeAfter: head.closeAfter || unread)
        ?? (unread ? .close : nil)

    case .throttle(let chunkSize, let pause, let slowBytes):
      let chunk = Int64(max(1, chunkSize))
      let slow = slowBytes ?? .max
      var checksum = ByteChecksum()
      var read: Int64 = 0
      var stopped = false
      // A small buffer, so that the client's sending waits on the pauses rather than filling it.
      Socket.setReceiveBufferSize(fd, Int(min(chunk, 64 << 10)))
      // Pieces no larger than a chunk: each read is followed by its pause.
      let (count, end) = parser.consumeBody(of: head, pieceSize: Int(chunk), sendContinue: sendContinue) {
        piece in
        checksum.update(piece)
        let before = min(read, slow)
        read += Int64(piece.count)
        // One pause for each chunk boundary this piece crossed within the slow bytes.
        var pauses = min(read, slow) / chunk - before / chunk
        while pauses > 0 {
          guard state.sleep(for: pause) else {
            stopped = true
            return false
          }
          pauses -= 1
        }
        return true
      }
      let consumed = ConsumedBody(byteCount: count, checksum: checksum, isComplete: end == .complete)
      switch end {
      case .complete, .limitReached:
        return answer(parser.request(head, consumedBody: consumed), closeAfter: head.closeAfter)
      case .streamEnded, .sinkFailed:
        // The client went away, or the server stopped during a pause.
        state.record(parser.request(head, consumedBody: consumed))
        state.answering()
        return stopped ? .reset : .close
      case .malformed(let status, let message):
        return malformed(status: status, message: message)
      }

    case .cut(let afterBytes):
      var checksum = ByteChecksum()
      let (count, end) = parser.consumeBody(of: head, limit: max(0, afterBytes), sendContinue: sendContinue) {
        checksum.update($0)
        return true
      }
      state.record(
        parser.request(
          head,
          consumedBody: ConsumedBody(byteCount: count, checksum: checksum, isComplete: end == .complete)))
      state.answering()
      return .reset
    }
  }

  /// Records a complete request, asks the handler and performs its action.
  private func answer(_ request: RecordedRequest, closeAfter: Bool) -> Ending? {
    state.record(request)
    let action = handler(request)
    // A slow answer is still being waited for during its delay; `perform` notes its end.
    if case .slowHeaders = action {} else { state.answering() }
    return perform(action, request: request, closeAfter: closeAfter)
  }

  /// Answers input that is not acceptable HTTP with `status` and ends the connection.
  private func malformed(status: Int, message: String) -> Ending {
    let response = ServerResponse.text(message + "\n", status: status)
    _ = Socket.send(fd, Self.head(response, closing: true) + response.body)
    return .close
  }

  /// Performs one action; returns how to end the connection, or `nil` to keep it open.
  private func perform(_ action: ServerAction, request: RecordedRequest, closeAfter: Bool)
    -> Ending?
  {
    switch action {
    case .respond(let response):
      return respond(response, request: request, closeAfter: closeAfter)

    case .closeImmediately:
      return .close

    case .raw(let bytes):
      _ = Socket.send(fd, bytes)
      return .close

    case .repeated(let head, let unit, let count, let interval):
      guard Socket.send(fd, head), !unit.isEmpty else { return .close }
      // Without pauses, writes of many units, so that the client gets them as fast as it reads.
      let perWrite = interval == .zero ? max(1, (64 << 10) / unit.count) : 1
      let batch = Array(Array(repeating: unit, count: perWrite).joined())
      var left = count ?? .max
      while left > 0, interval == .zero ? !state.isStopped : state.sleep(for: interval) {
        let units = min(left, perWrite)
        guard Socket.send(fd, units == perWrite ? batch[...] : batch.prefix(units * unit.count)) else {
          break
        }
        left -= units
      }
      return .close

    case .resetMidHeaders:
      let head = Self.head(.text("this response is cut short"), closing: false)
      _ = Socket.send(fd, head.prefix(min(head.count - 1, 28)))
      return .reset

    case .resetMidBody(let response, let afterBytes):
      let sent = min(max(0, afterBytes), response.body.count)
      _ = Socket.send(fd, Self.head(response, closing: false) + response.body.prefix(sent))
      return .reset

    case .truncatedBody(let response, let sendBytes):
      let sent = min(max(0, sendBytes), response.body.count)
      _ = Socket.send(fd, Self.head(response, closing: false) + response.body.prefix(sent))
      return .close

    case .wrongContentLength(var response, let declared):
      response.headers.removeAll { $0.0.lowercased() == "content-length" }
      response.headers.append(("Content-Length", String(declared)))
      guard Socket.send(fd, Self.head(response, closing: false) + response.body) else {
        return .close
      }
      // Hold the connection open (reading and dropping input) until the client gives up or
      // stop() shuts the socket down.
      withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 1) { scratch in
        while Socket.receive(fd, into: scratch) > 0 {}
      }
      return .close

    case .slowHeaders(let response, let delay):
      let slept = state.sleep(for: delay)
      state.answering()
      guard slept else { return .close }
      return respond(response, request: request, closeAfter: closeAfter)

    case .trickle(let response, let chunkSize, let interval):
      let closing = closeAfter || Self.asksToClose(response)
      let head = Self.head(response, closing: closing, http10: request.version == "HTTP/1.0")
      guard Socket.send(fd, head) else { return .close }
      if request.method != "HEAD" {
        let step = max(1, chunkSize)
        for start in stride(from: 0, to: response.body.count, by: step) {
          guard state.sleep(for: interval),
            Socket.send(fd, response.body[start..<min(start + step, response.body.count)])
          else { return .close }
        }
      }
      return closing ? .close : nil

    case .gzipBomb(let decompressedSize):
      let response = ServerResponse(
        status: 200,
        headers: [("Content-Type", "application/octet-stream"), ("Content-Encoding", "gzip")],
        body: GzipBomb.stream(decompressedSize: decompressedSize))
      return respond(response, request: request, closeAfter: closeAfter)

    case .stream(let response):
      return stream(response, request: request, closeAfter: closeAfter)

    case .chunked(var response, let chunkSize):
      response.headers.removeAll {
        ["content-length", "transfer-encoding"].contains($0.0.lowercased())
      }
      response.headers.append(("Transfer-Encoding", "chunked"))
      let closing = closeAfter || Self.asksToClose(response)
      guard Socket.send(fd, Self.head(response, closing: closing)) else { return .close }
      if request.method != "HEAD" {
        // Frames are batched into writes of about 64 KiB so tiny chunk sizes stay fast.
        let step = max(1, chunkSize)
        var pending: [UInt8] = []
        for start in stride(from: 0, to: response.body.count, by: step) {
          let chunk = response.body[start..<min(start + step, response.body.count)]
          pending += Array(String(chunk.count, radix: 16).utf8) + [0x0D, 0x0A]
          pending += chunk
          pending += [0x0D, 0x0A]
          if pending.count >= 64 * 1024 {
            guard Socket.send(fd, pending) else { return .close }
            pending.removeAll(keepingCapacity: true)
          }
        }
        pending += Array("0\r\n\r\n".utf8)
        guard Socket.send(fd, pending) else { return .close }
      }
      return closing ? .close : nil
    }
  }

  /// Sends a complete response; returns `.close` when either side asked to close.
  func respond(_ response: ServerResponse, request: RecordedRequest, closeAfter: Bool)
    -> Ending?
  {
    let closing = closeAfter || Self.asksToClose(response)
    var bytes = Self.head(response, closing: closing, http10: request.version == "HTTP/1.0")
    if request.method != "HEAD" && Self.allowsBody(response.status) {
      bytes += response.body
    }
    guard Socket.send(fd, bytes) else { return .close }
    return closing ? .close : nil
  }

  /// Unregisters and closes the socket, with FIN or RST.
  private func finish(_ ending: Ending) {
    switch ending {
    case .close:
      // Lingering close: send FIN, then drain what the client still sends (for example the
      // rest of a rejected body) so the kernel does not turn the close into RST.
      Socket.shutdownWrite(fd)
      Socket.setReceiveTimeout(fd, seconds: 0.2)
      var drained = 0
      withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: 1) { scratch in
        while drained < 1 << 20 {
          let n = Socket.receive(fd, into: scratch)
          if n <= 0 { break }
          drained += n
        }
      }
      state.release(fd, isConnection: true)
    case .reset:
      // Let bytes already written reach the peer before the RST discards the send queue.
      var waited = 0
      while Socket.unsentByteCount(fd) > 0 && waited < 100 && state.sleep(for: .milliseconds(10)) {
        waited += 1
      }
      state.release(fd, isConnection: true, reset: true)
    }
  }

  /// Returns whether the response itself carries `Connection: close`.
  static func asksToClose(_ response: ServerResponse) -> Bool {
    asksToClose(response.headers)
  }

  /// Returns whether these header fields carry `Connection: close`.
  static func asksToClose(_ headers: [(String, String)]) -> Bool {
    headers.contains {
      $0.0.lowercased() == "connection" && $0.1.lowercased().contains("close")
    }
  }

  /// Returns whether a response with this status may carry a body.
  static func allowsBody(_ status: Int) -> Bool {
    !(100..<200).contains(status) && status != 204 && status != 304
  }

  /// Returns the status line and header block, adding `Content-Length` (unless `addsLength` is
  /// false) and `Connection: close` where needed.
  static func head(
    _ response: ServerResponse, closing: Bool, http10: Bool = false, addsLength: Bool = true
  ) -> [UInt8] {
    var text =
      "HTTP/1.1 \(response.status) \(ServerResponse.reasonPhrase(for: response.status))\r\n"
    var hasLength = false
    var hasConnection = false
    for (name, value) in response.headers {
      let lower = name.lowercased()
      if lower == "content-length" || lower == "transfer-encoding" { hasLength = true }
      if lower == "connection" { hasConnection = true }
      text += "\(name): \(value)\r\n"
    }
    if addsLength && !hasLength && allowsBody(response.status) {
      text += "Content-Length: \(response.body.count)\r\n"
    }
    if closing && !hasConnection {
      text += "Connection: close\r\n"
    } else if http10 && !hasConnection {
      // An HTTP/1.0 client closes after the response unless told the connection persists.
      text += "Connection: keep-alive\r\n"
    }
    text += "\r\n"
    return Array(text.utf8)
  }
}
