import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The bytes of a streamed body between the session, which delivers them as fast as the server
/// sends, and the reader, which takes them as fast as it wants: a value, as a state machine.
///
/// Why a spill file, not a paused transfer: FoundationNetworking (Swift 6.3.1) cannot pause a
/// running transfer. `URLSessionTask.suspend()` removes libcurl's handle from its multi handle,
/// which closes the connection, and `resume()` sends the request again: measured against a
/// loopback server, the server saw a broken pipe, then a second request, and the delegate
/// got a second response head and the body again from its first byte. Its delegate callbacks
/// are queued asynchronously from libcurl's thread, so nothing a delegate does slows libcurl.
/// The buffer therefore keeps at most `highWaterMark` bytes in memory and writes what comes
/// beyond it to an unlinked temporary file, which the reader drains in order; memory stays flat
/// whatever the reader's pace, and the disk holds at most `spillLimit` bytes (past it the
/// stream fails with `HTTPStreamError.readerFellBehind`).
///
/// Order: once bytes have gone to the file, every later byte goes there too, until the reader
/// has drained it; the reader takes the memory's chunks first, then the file's. The file's
/// reads and writes run under the owner's lock (`ResponseStream`): they are short (at most
/// `readSize` bytes, from the page cache) and run no code but the system's.
struct ResponseStreamBuffer: Sendable {
  /// How the stream ended, once it has.
  enum End: Sendable {
    /// The whole body arrived.
    case finished
    /// The request failed, or the buffer could not keep the bytes.
    case failed(any Error)
    /// The reader cancelled it, stopped iterating or dropped the stream.
    case cancelled
  }

  /// What `next` found: bytes, the end, or nothing yet (the reader waits).
  enum Next: Sendable {
    case bytes(Data)
    case end(End)
    case wait
  }

  /// The bytes kept in memory at most; beyond them, bytes go to the spill file.
  let highWaterMark: Int
  /// The most bytes the spill file holds; past it the stream fails.
  let spillLimit: Int64
  /// The most bytes one read from the spill file returns.
  let readSize: Int

  private var chunks: [Data] = []
  private var head = 0
  /// The bytes in `chunks[head...]`.
  private(set) var memoryBytes = 0
  /// The most bytes `memoryBytes` has held, for tests.
  private(set) var peakMemoryBytes = 0
  /// Every byte appended.
  private(set) var receivedBytes: Int64 = 0
  /// Every byte that went through the spill file, for tests.
  private(set) var spilledBytes: Int64 = 0
  /// The spill file's descriptor (unlinked at creation), while it is open.
  private var file: Int32?
  private var fileRead: Int64 = 0
  private var fileWritten: Int64 = 0
  private(set) var end: End?

  init(highWaterMark: Int, spillLimit: Int64, readSize: Int = 256 * 1024) {
    self.highWaterMark = max(0, highWaterMark)
    self.spillLimit = spillLimit
    self.readSize = max(1, readSize)
  }

  /// Whether a reader waiting now would wait: nothing is buffered and the stream goes on.
  var isEmpty: Bool { memoryBytes == 0 && fileRead == fileWritten }

  /// Whether `count` more bytes would stay in memory (or the stream has ended and takes no
  /// more): a writer that may wait (the socket transport's) waits until they would.
  func hasRoom(for count: Int) -> Bool {
    end != nil || (fileRead == fileWritten && (memoryBytes == 0 || memoryBytes + count <= highWaterMark))
  }

  // MARK: Events

  /// Keeps `data` for the reader; returns the end it caused (the spill file failed or is full).
  mutating func append(_ data: Data) -> End? {
    guard end == nil, !data.isEmpty else { return nil }
    receivedBytes += Int64(data.count)
    if fileRead == fileWritten, memoryBytes + data.count <= highWaterMark {
      chunks.append(data)
      memoryBytes += data.count
      peakMemoryBytes = max(peakMemoryBytes, memoryBytes)
      return nil
    }
    if let error = spill(data) {
      return finish(.failed(error))
    }
    return nil
  }

  /// Returns the next bytes for the reader, the end once every byte has been read, or `wait`.
  mutating func next() -> Next {
    if head < chunks.count {
      let data = chunks[head]
      chunks[head] = Data()
      head += 1
      memoryBytes -= data.count
      if head == chunks.count {
        chunks.removeAll(keepingCapacity: true)
        head = 0
      } else if head >= 32, head * 2 >= chunks.count {
        chunks.removeFirst(head)
        head = 0
      }
      return .bytes(data)
    }
    if fileRead < fileWritten {
      switch readSpill() {
      case .success(let data): return .bytes(data)
      case .failure(let error): return .end(finish(.failed(error)))
      }
    }
    if let end {
      closeFile()
      return .end(end)
    }
    return .wait
  }

  /// Ends the stream with `end` unless it has ended already; returns the end in force.
  ///
  /// A cancelled stream drops what it holds at once; a finished or failed one keeps its bytes
  /// for the reader, who sees the end after them.
  @discardableResult
  mutating func finish(_ end: End) -> End {
    if let current = self.end { return current }
    self.end = end
    if case .cancelled = end {
      chunks.removeAll()
      head = 0
      memoryBytes = 0
      fileRead = fileWritten
      closeFile()
    }
    return end
  }

  /// Closes the spill file, if open (the owner's `deinit` calls it too).
  mutating func closeFile() {
    if let file { _ = close(file) }
    file = nil
  }

  // MARK: The spill file

  private mutating func spill(_ data: Data) -> (any Error)? {
    guard fileWritten + Int64(data.count) <= spillLimit else {
      return HTTPStreamError.readerFellBehind(limit: spillLimit)
    }
    let descriptor: Int32
    if let file {
      descriptor = file
    } else {
      switch Self.openSpillFile() {
      case .success(let opened): descriptor = opened
      case .failure(let error): return error
      }
      file = descriptor
    }
    var offset = 0
    let failure: Int32? = data.withUnsafeBytes { bytes in
      while offset < bytes.count {
        let written = pwrite(
          descriptor, bytes.baseAddress! + offset, bytes.count - offset, off_t(fileWritten) + off_t(offset))
        if written < 0 {
          if errno == EINTR { continue }
          return errno
        }
        offset += written
      }
      return nil
    }
    if let failure { return HTTPStreamError.bufferFailed(String(cString: strerror(failure))) }
    fileWritten += Int64(data.count)
    spilledBytes += Int64(data.count)
    return nil
  }

  private mutating func readSpill() -> Result<Data, any Error> {
    guard let file else { return .failure(HTTPStreamError.bufferFailed("the spill file is closed")) }
    let count = Int(min(Int64(readSize), fileWritten - fileRead))
    var data = Data(count: count)
    var filled = 0
    let failure: Int32? = data.withUnsafeMutableBytes { bytes in
      while filled < count {
        let read = pread(file, bytes.baseAddress! + filled, count - filled, off_t(fileRead) + off_t(filled))
        if read < 0 {
          if errno == EINTR { continue }
          return errno
        }
        if read == 0 { return EIO }
        filled += read
      }
      return nil
    }
    if let failure { return .failure(HTTPStreamError.bufferFailed(String(cString: strerror(failure)))) }
    fileRead += Int64(count)
    if fileRead == fileWritten {
      // Drained: the next bytes go to memory again, and the file starts over.
      _ = ftruncate(file, 0)
      fileRead = 0
      fileWritten = 0
    }
    return .success(data)
  }

  /// Creates the spill file in the temporary directory and unlinks it at once: it disappears
  /// when closed, whatever happens to the process.
  private static func openSpillFile() -> Result<Int32, any Error> {
    var template = Array((NSTemporaryDirectory() + "/PromiseHTTP-stream-XXXXXX").utf8CString)
    let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard descriptor >= 0 else {
      return .failure(HTTPStreamError.bufferFailed(String(cString: strerror(errno))))
    }
    template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
    return .success(descriptor)
  }
}
