import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// An `HTTPBody` made ready to send: the request's `httpBody`, or a source the tasks read.
struct PreparedUpload: Sendable {
  /// The bytes to send as the request's `httpBody`, when the body is in memory.
  var data: Data?
  /// The source each task gets its body from, when it is not.
  var source: (any UploadBodySource)?
  var length: Int64?
  var contentType: String
}

extension HTTPBody {
  /// Checks the body (files readable, a form's boundary) and makes it ready to send.
  func prepare() -> Result<PreparedUpload, HTTPError> {
    let octets = MultipartForm.defaultFileType
    switch content {
    case .data(let data):
      return .success(
        PreparedUpload(data: data, length: Int64(data.count), contentType: octets))
    case .file(let url):
      return UploadFile.size(of: url).map { size in
        PreparedUpload(source: FileUploadSource(url), length: size, contentType: octets)
      }
    case .stream:
      // Spooled to a file first: see `UploadSpool`.
      return .failure(.invalidRequest("a stream of chunks is sent from the file it is written to"))
    case .multipart(let form):
      return form.plan().map { plan in
        if let data = plan.data {
          return PreparedUpload(
            data: data, length: Int64(data.count), contentType: form.contentType)
        }
        return PreparedUpload(
          source: MultipartSource(plan, boundary: form.boundary), length: plan.length,
          contentType: form.contentType)
      }
    }
  }
}

// MARK: Files

/// The checks and searches on the files of uploads.
enum UploadFile {
  /// The size of the regular file at `url`, or `HTTPError.invalidRequest` naming it when it
  /// cannot be read (missing, a directory, no permission).
  static func size(of url: URL) -> Result<Int64, HTTPError> {
    guard url.isFileURL else {
      return .failure(.invalidRequest("the upload's file '\(url.absoluteString)' is not a file URL"))
    }
    let path = url.path
    func failure(_ reason: String) -> Result<Int64, HTTPError> {
      .failure(.invalidRequest("the upload's file '\(path)' cannot be read: \(reason)"))
    }
    var info = stat()
    guard stat(path, &info) == 0 else { return failure(String(cString: strerror(errno))) }
    guard (info.st_mode & S_IFMT) == S_IFREG else {
      return failure((info.st_mode & S_IFMT) == S_IFDIR ? "it is a directory" : "it is not a regular file")
    }
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { return failure(String(cString: strerror(errno))) }
    close(descriptor)
    return .success(Int64(info.st_size))
  }

  /// Whether `haystack` contains `needle`.
  static func contains(_ needle: Data, in haystack: some DataProtocol & ContiguousBytes) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    return haystack.withUnsafeBytes { hay in
      needle.withUnsafeBytes { pin in
        guard let base = hay.baseAddress, let pattern = pin.baseAddress else { return false }
        let first = Int32(pin[0])
        let last = hay.count - pin.count
        var start = 0
        // memchr finds each candidate first byte, memcmp checks the rest.
        while start <= last {
          guard let found = memchr(base + start, first, last - start + 1) else { return false }
          if memcmp(found, pattern, pin.count) == 0 { return true }
          start = base.distance(to: UnsafeRawPointer(found)) + 1
        }
        return false
      }
    }
  }
}

/// A file body: FoundationNetworking reads it itself, without blocking, and sends its size as
/// `Content-Length`.
final class FileUploadSource: UploadBodySource {
  let url: URL

  init(_ url: URL) {
    self.url = url
  }

  func makeTaskBody() -> UploadTaskBody {
    .file(url)
  }

  func rewound(_ stream: (any UploadBodyStream)?) -> (any UploadBodyStream)? {
    nil
  }
}

// MARK: Multipart

/// A form with files: each task reads a new `MultipartBodyStream` from the start.
final class MultipartSource: UploadBodySource {
  let plan: MultipartPlan
  let boundary: String

  init(_ plan: MultipartPlan, boundary: String) {
    self.plan = plan
    self.boundary = boundary
  }

  func makeTaskBody() -> UploadTaskBody {
    .stream(MultipartBodyStream(plan.segments, boundary: boundary))
  }

  func rewound(_ stream: (any UploadBodyStream)?) -> (any UploadBodyStream)? {
    // FoundationNetworking skips the bytes already sent by reading them again.
    MultipartBodyStream(plan.segments, boundary: boundary)
  }
}

/// Reads a form's segments in order, files in chunks as their turn comes, checking each file's
/// content for the boundary and its size against the one the body's length was made from.
///
/// FoundationNetworking reads it on the session's work queue; a read takes at most one read of
/// the disk, of at most the length asked for (64 KiB).
final class MultipartBodyStream: BodyStreamReading {
  private struct State {
    var index = 0
    var offset = 0
    var file: FileHandle?
    var fileRead: Int64 = 0
    /// The last bytes read of the current file, so a boundary across two reads is found.
    var tail = Data()
    var failure: HTTPError?
    var aborted = false
  }

  private let segments: [MultipartPlan.Segment]
  private let needle: Data
  private let state = LockedBox(State())

  init(_ segments: [MultipartPlan.Segment], boundary: String) {
    self.segments = segments
    self.needle = Data(("--" + boundary).utf8)
  }

  func makeInputStream() -> InputStream { BodyInputStream(self) }

  var failure: HTTPError? { state.withLock { $0.failure } }

  func abort() {
    state.withLock { state in
      state.aborted = true
      try? state.file?.close()
      state.file = nil
    }
  }

  var hasBytesAvailable: Bool {
    // True while anything is left, and after a failure, so that the next read reports it
    // (FoundationNetworking takes `false` for the end of the body).
    state.withLock { $0.aborted || $0.failure != nil || $0.index < segments.count }
  }

  func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength length: Int) -> Int {
    state.withLock { state in
      guard !state.aborted, state.failure == nil else { return -1 }
      while state.index < segments.count {
        switch segments[state.index] {
        case .bytes(let data):
          guard state.offset < data.count else {
            state.index += 1
            state.offset = 0
            continue
          }
          let count = min(length, data.count - state.offset)
          data.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(
              from: bytes.baseAddress! + state.offset, byteCount: count)
          }
          state.offset += count
          return count
        case .file(let url, let size):
          switch readFile(url, size: size, into: buffer, maxLength: length, &state) {
          case .bytes(let count): return count
          case .next: continue
          case .failed(let error):
            state.failure = error
            try? state.file?.close()
            state.file = nil
            return -1
          }
        }
      }
      return 0
    }
  }

  private enum FileRead {
    case bytes(Int)
    case next
    case failed(HTTPError)
  }

  private func readFile(
    _ url: URL, size: Int64, into buffer: UnsafeMutablePointer<UInt8>, maxLength length: Int,
    _ state: inout State
  ) -> FileRead {
    let path = url.path
    do {
      if state.file == nil {
        state.file = try FileHandle(forReadingFrom: url)
        state.fileRead = 0
        state.tail = Data()
      }
      guard let file = state.file else { return .next }
      let remaining = size - state.fileRead
      guard remaining > 0 else {
        if let extra = try file.read(upToCount: 1), !extra.isEmpty {
          return .failed(.invalidRequest("the upload's file '\(path)' grew while it was being sent"))
        }
        try? file.close()
        state.file = nil
        state.index += 1
        state.offset = 0
        return .next
      }
      let chunk = try file.read(upToCount: Int(min(Int64(length), remaining))) ?? Data()
      guard !chunk.isEmpty else {
        return .failed(
          .invalidRequest(
            "the upload's file '\(path)' shrank while it was being sent: \(state.fileRead) of \(size) bytes"))
      }
      var window = state.tail
      window.append(chunk)
      if UploadFile.contains(needle, in: window) {
        return .failed(
          .invalidRequest(
            "the upload's file '\(path)' contains the form's boundary; send it with another boundary"))
      }
      state.tail = Data(window.suffix(needle.count - 1))
      chunk.withUnsafeBytes { bytes in
        UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress!, byteCount: chunk.count)
      }
      state.fileRead += Int64(chunk.count)
      return .bytes(chunk.count)
    } catch {
      return .failed(
        .invalidRequest("the upload's file '\(path)' cannot be read: \(error.localizedDescription)"))
    }
  }
}

// MARK: Streams of chunks

/// Writes a stream of chunks to a temporary file, which is then uploaded as a file.
///
/// FoundationNetworking reads a body stream synchronously on a work queue that every
/// `URLSession` of the process shares, and takes a stream with nothing to read for its end: a
/// read that waited for the next chunk would block every `dataTask(with:)` and `resume()` of the
/// process meanwhile (measured on Swift 6.3.1: a `GET` on another session, and the calling
/// thread with it, waited until the chunk came), and deadlock when the chunks come from a
/// request of the same process, or from a task that needs a thread so blocked. A file it reads
/// without blocking and sends with its `Content-Length`.
enum UploadSpool {
  /// Drains `producer` into a new file in the temporary directory.
  ///
  /// Returns the file and its size, or `HTTPError.invalidRequest` when the sequence throws, does
  /// not add up to `length`, or the file cannot be written; the file is then removed.
  static func spool(_ producer: ChunkProducer, length: Int64?) async -> Result<(URL, Int64), HTTPError> {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent(
      "PromiseHTTP-upload-\(UUID().uuidString)")
    guard
      FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]),
      let handle = try? FileHandle(forWritingTo: url)
    else {
      return .failure(
        .invalidRequest("could not create a temporary file for the stream of chunks at '\(url.path)'"))
    }
    let written = LockedBox<Int64>(0)
    let failure = LockedBox<HTTPError?>(nil)
    do {
      try await producer.run { chunk in
        guard !Task.isCancelled else { return false }
        do {
          try handle.write(contentsOf: chunk)
        } catch {
          failure.withLock {
            $0 = .invalidRequest("could not write the stream of chunks to '\(url.path)': \(error)")
          }
          return false
        }
        written.withLock { $0 += Int64(chunk.count) }
        return true
      }
    } catch {
      failure.withLock { $0 = $0 ?? .invalidRequest("the stream of chunks failed: \(error)") }
    }
    try? handle.close()
    let size = written.load()
    var problem = failure.load()
    if problem == nil, Task.isCancelled { problem = .invalidRequest("the upload was cancelled") }
    if problem == nil, let length, size != length {
      problem = .invalidRequest("the stream of chunks yielded \(size) bytes, not the \(length) of its length")
    }
    if let problem {
      try? FileManager.default.removeItem(at: url)
      return .failure(problem)
    }
    return .success((url, size))
  }
}

// MARK: The stream FoundationNetworking reads

/// A body stream read through `BodyInputStream`.
protocol BodyStreamReading: UploadBodyStream {
  /// Whether a read may still return bytes or an error; `false` is the end of the body. May wait.
  var hasBytesAvailable: Bool { get }
  /// Copies at most `maxLength` bytes to `buffer`: the count, 0 at the end, -1 on a failure.
  func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int
}

/// The `InputStream` FoundationNetworking reads a body from (`URLRequest.httpBodyStream`): it
/// forwards to a `BodyStreamReading`.
///
/// FoundationNetworking calls `hasBytesAvailable` before each read and takes `false` for the end
/// of the body, never waits for bytes to become available, and reads on its session's work
/// queue (swift-corelibs-foundation, `_BodyStreamSource`).
final class BodyInputStream: InputStream {
  private let body: any BodyStreamReading
  // Read and written on FoundationNetworking's work queue only.
  private var status: Stream.Status = .notOpen

  init(_ body: any BodyStreamReading) {
    self.body = body
    super.init(data: Data())
  }

  override func open() { status = .open }
  override func close() { status = .closed }
  override var streamStatus: Stream.Status { status }
  override var streamError: (any Error)? { body.failure }
  override var hasBytesAvailable: Bool { body.hasBytesAvailable }

  override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength length: Int) -> Int {
    body.read(buffer, maxLength: length)
  }

  override func getBuffer(
    _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>
  ) -> Bool {
    false
  }
}
