import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An error thrown when the server cannot open a listening socket.
public struct LoopbackServerError: Error, CustomStringConvertible, Sendable {
  /// The system call that failed, for example `bind`.
  public let operation: String
  /// The `errno` value the call left.
  public let code: Int32

  /// Returns a readable description such as `bind(127.0.0.2) failed: ... (errno 99)`.
  public var description: String {
    "\(operation) failed: \(String(cString: strerror(code))) (errno \(code))"
  }
}

/// Thin wrappers over the socket calls the server uses; all IO is blocking.
enum Socket {
  /// Opens a TCP socket listening on `address` at an ephemeral port; returns it and the port.
  ///
  /// With `listening: false` the port is only bound: it stays reserved, and a connection to it is
  /// refused (no `SO_REUSEADDR`, so no other socket can take it meanwhile).
  static func listen(
    on address: String, listening: Bool = true
  ) throws(LoopbackServerError) -> (fd: Int32, port: Int) {
    let fd = SystemCalls.streamSocket(family: AF_INET)
    guard fd >= 0 else { throw LoopbackServerError(operation: "socket", code: errno) }
    var one: Int32 = 1
    if listening { setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size)) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    guard inet_pton(AF_INET, address, &addr.sin_addr) == 1 else {
      close(fd)
      throw LoopbackServerError(operation: "inet_pton(\(address))", code: EINVAL)
    }
    let bound = withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0 else {
      let code = errno
      close(fd)
      throw LoopbackServerError(operation: "bind(\(address))", code: code)
    }
    guard !listening || SystemCalls.listen(fd, backlog: 256) == 0 else {
      let code = errno
      close(fd)
      throw LoopbackServerError(operation: "listen(\(address))", code: code)
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else {
      let code = errno
      close(fd)
      throw LoopbackServerError(operation: "getsockname(\(address))", code: code)
    }
    return (fd, Int(UInt16(bigEndian: addr.sin_port)))
  }

  /// Waits for a connection; returns its descriptor, or `nil` when the listener is shut down.
  static func accept(_ listener: Int32) -> Int32? {
    while true {
      let fd = SystemCalls.accept(listener)
      if fd >= 0 {
        // accept4 is not visible without _GNU_SOURCE; set close-on-exec separately.
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
      }
      switch errno {
      case EINTR, ECONNABORTED, EPROTO:
        continue
      case EMFILE, ENFILE, ENOBUFS, ENOMEM:
        // Out of descriptors or memory: back off briefly instead of spinning or quitting.
        usleep(10_000)
        continue
      default:
        return nil
      }
    }
  }

  /// Disables Nagle's algorithm so small trickled writes leave at once.
  static func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
  }

  /// Sets the socket's receive buffer to about `bytes` (the kernel doubles it), which turns
  /// off its automatic growth: a peer's sending then waits on a slow reader sooner.
  static func setReceiveBufferSize(_ fd: Int32, _ bytes: Int) {
    var size = Int32(clamping: bytes)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
  }

  /// Sets a receive timeout, or clears it with `nil`.
  static func setReceiveTimeout(_ fd: Int32, seconds: Double?) {
    let total = seconds ?? 0
    var value = timeval(
      tv_sec: Int(total), tv_usec: Int((total - Double(Int(total))) * 1_000_000))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
  }

  /// Sends all of `bytes`; returns `false` when the peer is gone or the socket was shut down.
  static func send(_ fd: Int32, _ bytes: some Collection<UInt8>) -> Bool {
    let sent = bytes.withContiguousStorageIfAvailable { sendAll(fd, UnsafeRawBufferPointer($0)) }
    if let sent { return sent }
    return Array(bytes).withUnsafeBytes { sendAll(fd, $0) }
  }

  /// Sends all of `buffer`; returns `false` when the peer is gone or the socket was shut down.
  static func send(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
    sendAll(fd, buffer)
  }

  private static func sendAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
    repeatingPartialWrites(buffer) { SystemCalls.send(fd, $0, $1) }
  }

  /// Calls `write` with the rest of `buffer` until all of it is written (retrying on `EINTR`);
  /// returns `false` on an error (`errno` tells which) or when nothing more can be written.
  static func repeatingPartialWrites(
    _ buffer: UnsafeRawBufferPointer, _ write: (UnsafeRawPointer, Int) -> Int
  ) -> Bool {
    var offset = 0
    while offset < buffer.count {
      let n = write(buffer.baseAddress! + offset, buffer.count - offset)
      if n > 0 {
        offset += n
      } else if n < 0 && errno == EINTR {
        continue
      } else {
        return false
      }
    }
    return true
  }

  /// Receives up to `buffer.count` bytes; returns the count, 0 at end of stream, -1 on error.
  static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
    while true {
      let n = recv(fd, buffer.baseAddress, buffer.count, 0)
      if n < 0 && errno == EINTR { continue }
      return n
    }
  }

  /// Returns how many written bytes the kernel has not yet handed to the peer.
  static func unsentByteCount(_ fd: Int32) -> Int {
    var pending: Int32 = 0
    // TIOCOUTQ (0x5411) is SIOCOUTQ for TCP sockets on Linux.
    guard ioctl(fd, UInt(TIOCOUTQ), &pending) == 0 else { return 0 }
    return Int(pending)
  }

  /// Makes the next `close` send RST instead of FIN.
  static func setLingerZero(_ fd: Int32) {
    var option = linger(l_onoff: 1, l_linger: 0)
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
  }

  /// Shuts down both directions, waking any thread blocked on the socket.
  static func shutdownBoth(_ fd: Int32) {
    _ = SystemCalls.shutdown(fd, Int32(SHUT_RDWR))
  }

  /// Shuts down the sending direction: the peer sees FIN after the data already written.
  static func shutdownWrite(_ fd: Int32) {
    _ = SystemCalls.shutdown(fd, Int32(SHUT_WR))
  }

  /// Closes the descriptor.
  static func close(_ fd: Int32) {
    _ = SystemCalls.close(fd)
  }
}
