import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Reads `handle` (a pipe from a child process, say) to its end and returns what it read.
///
/// Use it instead of `FileHandle.readDataToEndOfFile()`: swift-corelibs-foundation reads there
/// with `try!`, and a read interrupted by a signal (`EINTR`, as a child's exit can cause) stops
/// the whole process (`readToEnd()` throws instead, and drops what it had read). Here an
/// interrupted read is retried; any other error ends the data, and what was read before it is
/// returned. It blocks until every writer has closed its end (a child's pipe: until the child
/// exits or closes it).
public func readToEnd(_ handle: FileHandle) -> Data {
  var data = Data()
  _ = readPieces(of: handle.fileDescriptor, pieceSize: 64 << 10) { data.append(contentsOf: $0) }
  return data
}

/// Reads `fd` from its current offset to its end, in pieces of at most `pieceSize` bytes handed
/// to `body` in order, retrying a read a signal interrupted (`EINTR`); returns the `errno` of a
/// read that failed otherwise, or `nil` at the end.
func readPieces(of fd: Int32, pieceSize: Int, _ body: (UnsafeRawBufferPointer) -> Void) -> Int32? {
  let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: pieceSize, alignment: 16)
  defer { buffer.deallocate() }
  while true {
    let count = read(fd, buffer.baseAddress, pieceSize)
    if count > 0 {
      body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    } else if count == 0 {
      return nil
    } else if errno != EINTR {
      return errno
    }
  }
}
