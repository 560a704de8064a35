#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The C library's calls whose Swift names the server's own types shadow (`Socket.listen`,
/// `Socket.close`, …), and the constants Glibc and Darwin spell differently, under one name.
///
/// Only Linux is built and tested (see the README); the Darwin branches say what the code
/// expects there, so that the test server is fenced rather than tied to Glibc.
enum SystemCalls {
  #if canImport(Glibc)
    /// `SOCK_STREAM`, close-on-exec from the start.
    static let streamSocketType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    /// The flags of every `send`: a write to a closed peer fails with `EPIPE`, without `SIGPIPE`.
    static let sendFlags = Int32(MSG_NOSIGNAL)
  #else
    /// `SOCK_STREAM`; Darwin's `socket` takes no close-on-exec flag (`socket(_:)` sets it after).
    static let streamSocketType = SOCK_STREAM
    /// The flags of every `send`; Darwin has no `MSG_NOSIGNAL` (`socket(_:)` sets `SO_NOSIGPIPE`).
    static let sendFlags: Int32 = 0
  #endif

  /// Opens a TCP socket of `family`, close-on-exec and never raising `SIGPIPE` on a write.
  static func streamSocket(family: Int32) -> Int32 {
    let fd = socket(family, streamSocketType, 0)
    #if !canImport(Glibc)
      if fd >= 0 {
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
      }
    #endif
    return fd
  }

  /// `listen(2)`.
  static func listen(_ fd: Int32, backlog: Int32) -> Int32 {
    #if canImport(Glibc)
      Glibc.listen(fd, backlog)
    #else
      Darwin.listen(fd, backlog)
    #endif
  }

  /// `accept(2)`, without the peer's address.
  static func accept(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
      Glibc.accept(fd, nil, nil)
    #else
      Darwin.accept(fd, nil, nil)
    #endif
  }

  /// `send(2)` with `sendFlags`.
  static func send(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
      Glibc.send(fd, bytes, count, sendFlags)
    #else
      Darwin.send(fd, bytes, count, sendFlags)
    #endif
  }

  /// `read(2)`.
  static func read(_ fd: Int32, _ bytes: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
      Glibc.read(fd, bytes, count)
    #else
      Darwin.read(fd, bytes, count)
    #endif
  }

  /// `write(2)`.
  static func write(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
      Glibc.write(fd, bytes, count)
    #else
      Darwin.write(fd, bytes, count)
    #endif
  }

  /// `shutdown(2)`; `how` is `SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`.
  static func shutdown(_ fd: Int32, _ how: Int32) -> Int32 {
    #if canImport(Glibc)
      Glibc.shutdown(fd, how)
    #else
      Darwin.shutdown(fd, how)
    #endif
  }

  /// `close(2)`.
  static func close(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
      Glibc.close(fd)
    #else
      Darwin.close(fd)
    #endif
  }
}
