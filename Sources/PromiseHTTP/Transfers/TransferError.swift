import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A transfer's problem with a local file: the destination of a download, or its temporary file.
///
/// Problems on the wire (a connection lost, a bad status, a deadline) stay `HTTPError`s; this
/// error says what went wrong on disk, and which file, so that "the disk is full" is not
/// reported as a network failure. A download that fails with it has removed its temporary
/// file (unless `DownloadOptions.keepsPartialFileOnFailure`) and never touched the destination.
public enum TransferError: Error, Sendable, Equatable {
  /// The destination exists and `DownloadOptions.replacesExistingFile` is off; nothing was sent.
  case destinationExists(URL)
  /// The destination cannot be a download's file: not a `file:` URL, or a directory.
  case invalidDestination(URL, reason: String)
  /// A file-system call failed: `operation` ("create", "write", "rename", …) on `url`, with
  /// the C library's `errorNumber` (`ENOSPC` for a full disk, `EACCES` or `EROFS` for a
  /// directory that cannot be written).
  case fileSystem(operation: String, url: URL, errorNumber: Int32)

  /// The file the error concerns.
  public var url: URL {
    switch self {
    case .destinationExists(let url), .invalidDestination(let url, _), .fileSystem(_, let url, _): url
    }
  }

  /// The POSIX code of a `fileSystem` error (`.ENOSPC`, `.EACCES`, …), else `nil`.
  public var posixCode: POSIXErrorCode? {
    guard case .fileSystem(_, _, let number) = self else { return nil }
    return POSIXErrorCode(rawValue: number)
  }

  /// Returns the error for a failed call `operation` on `url`, reading `errno`.
  static func lastError(_ operation: String, _ url: URL) -> TransferError {
    .fileSystem(operation: operation, url: url, errorNumber: errno)
  }
}

extension TransferError: CustomStringConvertible, LocalizedError {
  /// One line: what failed, on which file, and why (`No space left on device (ENOSPC)`).
  public var description: String {
    switch self {
    case .destinationExists(let url):
      return
        "the download's destination \(url.path) exists already (set DownloadOptions.replacesExistingFile to replace it); nothing was downloaded"
    case .invalidDestination(let url, let reason):
      return "cannot download to \(url.absoluteString): \(reason)"
    case .fileSystem("lock", let url, let number) where number == EWOULDBLOCK:
      return "another download to the same destination is writing \(url.path); wait for it to end"
    case .fileSystem(let operation, let url, let number):
      let name = Self.symbol(number).map { " (\($0))" } ?? ""
      return "could not \(operation) \(url.path): \(String(cString: strerror(number)))\(name)"
    }
  }

  /// The same text as `description`.
  public var errorDescription: String? { description }

  /// `ENOSPC` and the other codes a transfer is likely to meet, by name.
  private static func symbol(_ number: Int32) -> String? {
    switch number {
    case ENOSPC: "ENOSPC"
    case EACCES: "EACCES"
    case EROFS: "EROFS"
    case EPERM: "EPERM"
    case ENOENT: "ENOENT"
    case ENOTDIR: "ENOTDIR"
    case EISDIR: "EISDIR"
    case EIO: "EIO"
    case EDQUOT: "EDQUOT"
    case EFBIG: "EFBIG"
    case EXDEV: "EXDEV"
    case EEXIST: "EEXIST"
    default: nil
    }
  }
}
