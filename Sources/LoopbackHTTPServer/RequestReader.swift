/// Buffered reading from a connected socket.
struct SocketInput {
  let fd: Int32
  private var buffer: [UInt8] = []
  private var start = 0

  init(fd: Int32) {
    self.fd = fd
  }

  /// The result of reading one line.
  enum Line {
    case line([UInt8])
    case endOfStream
    case tooLong
  }

  /// Reads more bytes from the socket; returns `false` at end of stream or on error.
  private mutating func fill() -> Bool {
    if start == buffer.count {
      buffer.removeAll(keepingCapacity: true)
      start = 0
    } else if start >= 64 * 1024 {
      buffer.removeSubrange(0..<start)
      start = 0
    }
    let fd = self.fd
    return withUnsafeTemporaryAllocation(byteCount: 64 * 1024, alignment: 1) { scratch in
      let n = Socket.receive(fd, into: scratch)
      guard n > 0 else { return false }
      buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[0..<n]))
      return true
    }
  }

  /// Reads a line ending in LF (a CR before it is dropped) of at most `limit` bytes.
  mutating func readLine(limit: Int) -> Line {
    var scanned = start
    while true {
      if let newline = buffer[scanned...].firstIndex(of: 0x0A) {
        var end = newline
        if end > start && buffer[end - 1] == 0x0D { end -= 1 }
        let line = Array(buffer[start..<end])
        start = newline + 1
        return line.count > limit ? .tooLong : .line(line)
      }
      if buffer.count - start > limit { return .tooLong }
      scanned = buffer.count
      let offset = scanned - start
      guard fill() else { return .endOfStream }
      scanned = start + offset
    }
  }

  /// Reads exactly `count` bytes; returns `nil` if the stream ends first.
  mutating func read(count: Int) -> [UInt8]? {
    var result: [UInt8] = []
    result.reserveCapacity(count)
    while result.count < count {
      if start == buffer.count {
        guard fill() else { return nil }
      }
      let take = min(count - result.count, buffer.count - start)
      result.append(contentsOf: buffer[start..<(start + take)])
      start += take
    }
    return result
  }

  /// Passes up to `count` bytes to `consume` as they arrive, in pieces of at most `pieceSize`
  /// bytes, keeping none; returns how many.
  ///
  /// It passes fewer only when the stream ends first or `consume` returns `false`. It never
  /// reads past those bytes, so a pipelined request stays unread.
  mutating func stream(
    count: Int64, pieceSize: Int = 256 * 1024, into consume: (UnsafeRawBufferPointer) -> Bool
  ) -> Int64 {
    var passed: Int64 = 0
    let size = max(1, min(pieceSize, 256 * 1024))
    while start < buffer.count && passed < count {
      let take = Int(min(Int64(buffer.count - start), count - passed, Int64(size)))
      let first = start
      let accepted = buffer.withUnsafeBytes {
        consume(UnsafeRawBufferPointer(rebasing: $0[first..<(first + take)]))
      }
      start += take
      passed += Int64(take)
      if !accepted { return passed }
    }
    guard passed < count else { return passed }
    let fd = self.fd
    return withUnsafeTemporaryAllocation(byteCount: size, alignment: 16) { scratch in
      while passed < count {
        let wanted = Int(min(Int64(size), count - passed))
        let n = Socket.receive(fd, into: UnsafeMutableRawBufferPointer(rebasing: scratch[0..<wanted]))
        guard n > 0 else { return passed }
        passed += Int64(n)
        guard consume(UnsafeRawBufferPointer(rebasing: scratch[0..<n])) else { return passed }
      }
      return passed
    }
  }
}
