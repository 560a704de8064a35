import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The body a socket task sends, and how it is framed.
struct SocketOutgoingBody {
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
