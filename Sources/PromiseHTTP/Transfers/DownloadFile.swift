import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The temporary file of one download, beside its destination: created before the request is
/// sent, written at explicit offsets, then moved onto the destination or discarded.
///
/// `.<name>.promisehttp-download` in the destination's directory, so that the final `rename`
/// stays on one file system and is atomic: the destination holds either nothing (or its old
/// file) or the whole body. A `.resume` file beside it records the URL (redacted) and the
/// validator its bytes belong to, when a failed download keeps it for a later one.
///
/// A value without a lock: `DownloadSink` keeps it in its locked state.
struct DownloadFile {
  /// What a kept partial file belongs to.
  struct ResumeRecord: Codable, Equatable {
    /// The request's URL, with secret query values redacted (no credential on disk).
    var url: String
    /// The strong `ETag`, or else the `Last-Modified`, of the response whose bytes the file holds.
    var validator: String
  }

  let destination: URL
  let temporaryURL: URL
  let resumeURL: URL
  /// The open temporary file; -1 once closed.
  private(set) var descriptor: Int32
  /// The bytes already in the file when it was opened (a kept partial file), and their validator.
  private(set) var resumable: (length: Int64, validator: String)?

  /// Tests only: a file opened in place of the temporary file by the downloads that start in
  /// this task (`/dev/full`, so that every write fails with `ENOSPC`), as it is: no check that
  /// it is a regular file of one name.
  @TaskLocal static var substituteTemporaryFile: String?

  /// Returns the temporary file's URL for `destination`.
  static func temporaryURL(for destination: URL) -> URL {
    destination.deletingLastPathComponent().appendingPathComponent(
      ".\(destination.lastPathComponent).promisehttp-download")
  }

  /// Checks `destination` and opens (or creates) its temporary file: the checks a download makes
  /// before anything is sent.
  ///
  /// - Parameters:
  ///   - destination: Where the file goes once complete.
  ///   - requestURL: The redacted URL of the request, compared with a kept file's record.
  ///   - options: Replacing, resuming.
  /// - Returns: The open file, or why the download must not start.
  static func create(
    destination: URL, requestURL: String, options: DownloadOptions
  ) -> Result<DownloadFile, TransferError> {
    guard destination.isFileURL, !destination.lastPathComponent.isEmpty, !destination.hasDirectoryPath else {
      return .failure(.invalidDestination(destination, reason: "the destination must be the URL of a file"))
    }
    let destination = destination.standardizedFileURL
    var status = stat()
    if stat(destination.path, &status) == 0 {
      if status.st_mode & S_IFMT == S_IFDIR {
        return .failure(.invalidDestination(destination, reason: "it is a directory"))
      }
      if !options.replacesExistingFile { return .failure(.destinationExists(destination)) }
    }
    let temporaryURL = temporaryURL(for: destination)
    let resumeURL = temporaryURL.appendingPathExtension("resume")
    var resumable: (length: Int64, validator: String)?
    // The temporary file is opened only when it is a regular file of this user with one name,
    // and never through a link: a symbolic or hard link planted at its name would otherwise be
    // truncated and written through, emptying or overwriting a file outside the download's
    // directory (CWE-59). Anything else at the name is removed and the file created anew.
    var descriptor =
      substituteTemporaryFile.map { open($0, O_RDWR | O_CLOEXEC) }
      ?? openOwnFile(temporaryURL.path, flags: O_RDWR)
    if descriptor >= 0, options.resumesPartialFile, let data = readOwnFile(resumeURL.path),
      let record = try? JSONDecoder().decode(ResumeRecord.self, from: data), record.url == requestURL,
      fstat(descriptor, &status) == 0, status.st_size > 0
    {
      resumable = (Int64(status.st_size), record.validator)
    }
    // The record is rewritten if this download fails and keeps the file again.
    unlink(resumeURL.path)
    if descriptor < 0 {
      descriptor = createExclusively(temporaryURL.path)
      guard descriptor >= 0 else { return .failure(.lastError("create", temporaryURL)) }
    }
    // One download per destination at a time: a second one would write into the same
    // temporary file. The lock goes with the descriptor (closed at the end, or by the kernel).
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      let error = TransferError.lastError("lock", temporaryURL)
      close(descriptor)
      return .failure(error)
    }
    // A stale file (not resumed) starts empty; an empty one is left as it is. The descriptor is
    // the regular file checked above, not a link.
    if resumable == nil, fstat(descriptor, &status) == 0, status.st_size > 0, ftruncate(descriptor, 0) != 0 {
      let error = TransferError.lastError("truncate", temporaryURL)
      close(descriptor)
      return .failure(error)
    }
    return .success(
      DownloadFile(
        destination: destination, temporaryURL: temporaryURL, resumeURL: resumeURL, descriptor: descriptor,
        resumable: resumable))
  }

  /// Whether `status` is that of a regular file owned by this process's user with one name
  /// only (a second name would be a hard link through which a file elsewhere is written).
  private static func isOwnRegularFile(_ status: stat) -> Bool {
    status.st_mode & S_IFMT == S_IFREG && status.st_nlink == 1 && status.st_uid == geteuid()
  }

  /// Opens `path` with `flags` when it is a regular file of this user with one name, without
  /// following a link; -1 otherwise (nothing there, a link, a directory, a FIFO…).
  ///
  /// `lstat` first, so that nothing but a regular file is opened (a FIFO or a device could
  /// block or act on open); `O_NOFOLLOW` and `fstat` then check what was opened, so that a
  /// name swapped in between is refused too.
  private static func openOwnFile(_ path: String, flags: Int32) -> Int32 {
    var status = stat()
    guard lstat(path, &status) == 0, isOwnRegularFile(status) else { return -1 }
    let descriptor = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
    guard descriptor >= 0 else { return -1 }
    guard fstat(descriptor, &status) == 0, isOwnRegularFile(status) else {
      close(descriptor)
      return -1
    }
    return descriptor
  }

  /// Creates `path` as a new, empty regular file, after removing whatever else is at that name
  /// (a link is removed, never followed); the descriptor, or -1 with `errno` set.
  private static func createExclusively(_ path: String) -> Int32 {
    var attempts = 0
    while true {
      let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
      if descriptor >= 0 { return descriptor }
      attempts += 1
      // EEXIST: something is at the name (a link, a file of another user, a FIFO): remove it
      // and try again, a few times against a name that keeps coming back.
      guard errno == EEXIST || errno == EINTR, attempts < 4 else { return -1 }
      if errno == EEXIST, unlink(path) != 0, errno != ENOENT { return -1 }
    }
  }

  /// The contents of `path` when it is a small regular file of this user, read without
  /// following a link; `nil` otherwise.
  private static func readOwnFile(_ path: String) -> Data? {
    let descriptor = openOwnFile(path, flags: O_RDONLY)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while data.count <= 64 << 10 {
      let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
      if count < 0, errno == EINTR { continue }
      guard count > 0 else { return count == 0 ? data : nil }
      data.append(contentsOf: buffer[..<count])
    }
    return nil
  }

  /// Writes `data` to `path` as a new file, replacing (never following) what was there.
  private static func writeNewFile(_ path: String, _ data: Data) {
    unlink(path)
    let descriptor = createExclusively(path)
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    data.withUnsafeBytes { raw in
      var done = 0
      while done < raw.count {
        let count = pwrite(descriptor, raw.baseAddress! + done, raw.count - done, off_t(done))
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { return }
        done += count
      }
    }
  }

  /// Whether the name of the temporary file still names the open file (not a link or another
  /// file put in its place since it was created): checked before the file is moved into place.
  private func temporaryNameIsTheOpenFile() -> Bool {
    var opened = stat()
    var named = stat()
    return fstat(descriptor, &opened) == 0 && lstat(temporaryURL.path, &named) == 0
      && named.st_mode & S_IFMT == S_IFREG && named.st_dev == opened.st_dev && named.st_ino == opened.st_ino
  }

  /// Cuts the file to `length` bytes (0 to start over).
  func truncate(to length: Int64) -> TransferError? {
    while ftruncate(descriptor, off_t(length)) != 0 {
      if errno != EINTR { return .lastError("truncate", temporaryURL) }
    }
    return nil
  }

  /// The span of the file whose writing-back `write` starts as soon as it is complete.
  static let writeBackWindow: Int64 = 8 << 20

  /// Writes `data` at `offset`, all of it.
  ///
  /// Each time a `writeBackWindow` of the file is complete, its pages are handed to the disk at
  /// once (`posix_fadvise` `POSIX_FADV_DONTNEED` starts their write-back and drops those already
  /// written) rather than left dirty in the page cache: `commit` must `fsync` before the rename,
  /// and a 1 GiB file left dirty made that flush take most of a second, with the page cache
  /// holding the whole file meanwhile. Written back as it goes, the download ran at 1.7× the
  /// throughput of `curl -o` (which neither flushes nor drops anything) where it ran at 0.5×
  /// (Docs/Performance.md "Transfers").
  func write(_ data: Data, at offset: Int64) -> TransferError? {
    let written = data.withUnsafeBytes { raw -> TransferError? in
      guard let base = raw.baseAddress else { return nil }
      var done = 0
      while done < raw.count {
        let count = pwrite(descriptor, base + done, raw.count - done, off_t(offset + Int64(done)))
        if count < 0 {
          if errno == EINTR { continue }
          return .lastError("write", temporaryURL)
        }
        done += count
      }
      return nil
    }
    let window = Self.writeBackWindow
    let end = offset + Int64(data.count)
    #if canImport(Glibc)
      if written == nil, end / window > offset / window {
        // Advice only: a failure changes nothing but the speed.
        _ = posix_fadvise(
          descriptor, off_t((end / window - 1) * window), off_t(window), Int32(POSIX_FADV_DONTNEED))
      }
    #endif
    return written
  }

  /// Flushes and closes the file, then moves it onto the destination: refused if one has
  /// appeared meanwhile, unless `replacing`.
  ///
  /// Without `replacing`, `link` then `unlink` makes the refusal atomic (`link` fails on an
  /// existing name, where `rename` would replace it); a file system without hard links falls
  /// back to a check and `rename`.
  mutating func commit(replacing: Bool) -> TransferError? {
    // fsync: the rename must not reach the disk before the bytes it names (a crash would leave
    // an empty or short file under the final name).
    if fsync(descriptor) != 0, errno != EINVAL { return .lastError("flush", temporaryURL) }
    // Moving a link planted at the temporary name would make the destination that link.
    guard temporaryNameIsTheOpenFile() else {
      close(descriptor)
      descriptor = -1
      return .fileSystem(operation: "move into place", url: temporaryURL, errorNumber: ELOOP)
    }
    let closed = close(descriptor)
    descriptor = -1
    if closed != 0, errno != EINTR { return .lastError("close", temporaryURL) }
    if replacing {
      return rename(temporaryURL.path, destination.path) == 0 ? nil : .lastError("rename", temporaryURL)
    }
    if link(temporaryURL.path, destination.path) == 0 {
      unlink(temporaryURL.path)
      return nil
    }
    if errno == EEXIST { return .destinationExists(destination) }
    if access(destination.path, F_OK) == 0 { return .destinationExists(destination) }
    return rename(temporaryURL.path, destination.path) == 0 ? nil : .lastError("rename", temporaryURL)
  }

  /// Closes the file and removes it, or keeps it with a record of `validator` for a later
  /// download of `requestURL` (without a validator it is kept, and not resumed).
  mutating func discard(keeping: Bool, validator: String?, requestURL: String) {
    if descriptor >= 0 {
      close(descriptor)
      descriptor = -1
    }
    guard keeping else {
      unlink(temporaryURL.path)
      return
    }
    if let validator,
      let data = try? JSONEncoder().encode(ResumeRecord(url: requestURL, validator: validator))
    {
      Self.writeNewFile(resumeURL.path, data)
    }
  }
}
