import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

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
