/// Sending a ``StreamedResponse``: range evaluation, framing, faults, and the write loop.
extension Connection {
  /// Sends a streamed response; returns how to end the connection, or `nil` to keep it open.
  func stream(_ response: StreamedResponse, request: RecordedRequest, closeAfter: Bool) -> Ending? {
    let plan = StreamedResponse.Plan(response.faults)
    let body = response.body
    let length = body.length
    var etag = response.etag
    if plan.changesETag {
      let base = etag ?? body.etag
      let serial = state.nextSerial()
      etag = base.hasSuffix("\"") ? "\(base.dropLast())-\(serial)\"" : "\(base)-\(serial)"
    }

    var headers = response.headers
    if let etag { headers.append(("ETag", etag)) }
    if let lastModified = response.lastModified { headers.append(("Last-Modified", lastModified)) }
    if !plan.ignoresRange { headers.append(("Accept-Ranges", "bytes")) }

    var status = response.status
    var range: Range<Int64> = 0..<length
    if status == 200 && request.method == "GET" && !plan.ignoresRange {
      let evaluation = ByteRange.evaluate(
        range: request.header("Range"), ifRange: request.header("If-Range"), length: length, etag: etag,
        lastModified: response.lastModified)
      switch evaluation {
      case .full:
        break
      case .unsatisfiable:
        headers.append(("Content-Range", "bytes */\(length)"))
        return respond(
          ServerResponse(status: 416, headers: headers), request: request, closeAfter: closeAfter)
      case .partial(let asked):
        range = Self.shifted(asked, by: plan.rangeShift, length: length)
        status = 206
        headers.append(("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(length)"))
      }
    }

    let count = range.upperBound - range.lowerBound
    var closing = closeAfter || Self.asksToClose(headers)
    // A body of the wrong declared length leaves the connection unusable: close it after.
    var closesAfterBody = false
    switch response.framing {
    case .contentLength:
      headers.append(("Content-Length", String(max(0, count + plan.lengthError))))
      closesAfterBody = plan.lengthError != 0
    case .chunked:
      headers.append(("Transfer-Encoding", "chunked"))
    case .untilClose:
      closing = true
    }
    let head = Self.head(
      ServerResponse(status: status, headers: headers), closing: closing,
      http10: request.version == "HTTP/1.0", addsLength: false)
    guard Socket.send(fd, head) else { return .close }
    guard request.method != "HEAD" && Self.allowsBody(status) else { return closing ? .close : nil }

    let sent = min(count, plan.cut?.bytes ?? count)
    let chunked = response.framing == .chunked
    guard
      sendBody(
        body, from: range.lowerBound, count: sent,
        writeSize: plan.drip?.chunkSize ?? max(1, response.writeSize),
        chunked: chunked, pause: plan.drip?.interval)
    else { return .close }
    if let cut = plan.cut, cut.bytes < count {
      return cut.reset ? .reset : .close
    }
    if chunked {
      guard Socket.send(fd, Array("0\r\n\r\n".utf8)) else { return .close }
    }
    return closing || closesAfterBody ? .close : nil
  }

  /// Writes `count` bytes of `body` from `offset` in writes of `writeSize` bytes, each framed
  /// as a chunk when `chunked`, and each after `pause` when given; returns `false` when the
  /// peer is gone or the server stopped.
  private func sendBody(
    _ body: GeneratedBody, from offset: Int64, count: Int64, writeSize: Int, chunked: Bool, pause: Duration?
  ) -> Bool {
    // Room for a chunk's size line before the data and its CRLF after.
    let framing = chunked ? 24 : 0
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: writeSize + framing, alignment: 16)
    defer { buffer.deallocate() }
    var position = offset
    let end = offset + count
    while position < end {
      if let pause, !state.sleep(for: pause) { return false }
      let n = Int(min(Int64(writeSize), end - position))
      var start = 0
      if chunked {
        let sizeLine = Array((String(n, radix: 16) + "\r\n").utf8)
        buffer.copyBytes(from: sizeLine)
        start = sizeLine.count
      }
      body.copyBytes(
        from: position, into: UnsafeMutableRawBufferPointer(rebasing: buffer[start..<(start + n)]))
      var total = start + n
      if chunked {
        buffer[total] = 0x0D
        buffer[total + 1] = 0x0A
        total += 2
      }
      guard Socket.send(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<total])) else { return false }
      position += Int64(n)
    }
    return true
  }

  /// Returns `range` moved by `shift` bytes and kept inside `0..<length` and non-empty.
  static func shifted(_ range: Range<Int64>, by shift: Int64, length: Int64) -> Range<Int64> {
    guard shift != 0 else { return range }
    let lower = min(max(0, range.lowerBound + shift), length - 1)
    let upper = max(lower + 1, min(length, range.upperBound + shift))
    return lower..<upper
  }
}
