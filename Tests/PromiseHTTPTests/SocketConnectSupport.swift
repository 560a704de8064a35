import Foundation

#if canImport(Glibc)
  import Glibc

  /// A TCP listener that never accepts and whose backlog is full, so that a connection to it
  /// neither succeeds nor fails: Linux drops the SYNs of further connections (the client resends
  /// them for about two minutes), and a `connect` to it waits.
  ///
  /// It listens with a backlog of 0, which holds one connection, and makes that connection
  /// itself, left pending; it is ready once the listener has queued it.
  final class FullBacklogListener: Sendable {
    /// The address it listens on: `127.0.0.1` or `::1`.
    let host: String
    /// The port it listens on.
    let port: Int
    private let listener: Int32
    private let pending: Int32

    /// Listens on `host` (`127.0.0.1` or `::1`) at `port` (0: an ephemeral one) and fills the
    /// backlog.
    init(host: String = "127.0.0.1", port: Int = 0) throws {
      let family = host.contains(":") ? AF_INET6 : AF_INET
      var address = try Self.address(host, port: port, family: family)
      let listener = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
      guard listener >= 0 else { throw POSIXError.current("socket") }
      let bound = withUnsafeBytes(of: &address.storage) {
        bind(listener, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), address.length)
      }
      guard bound == 0, Glibc.listen(listener, 0) == 0 else {
        let error = POSIXError.current("bind/listen \(host):\(port)")
        Glibc.close(listener)
        throw error
      }
      var length = address.length
      _ = withUnsafeMutableBytes(of: &address.storage) {
        getsockname(listener, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
      }
      let chosen = withUnsafeBytes(of: &address.storage) { bytes in
        // sin_port and sin6_port are both at offset 2, in network order.
        Int(UInt16(bytes[2]) << 8 | UInt16(bytes[3]))
      }
      // The one connection the backlog holds, made (blocking) and never accepted.
      let pending = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
      let connected = withUnsafeBytes(of: &address.storage) {
        Glibc.connect(pending, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), address.length)
      }
      guard pending >= 0, connected == 0 else {
        let error = POSIXError.current("connect \(host):\(chosen)")
        if pending >= 0 { Glibc.close(pending) }
        Glibc.close(listener)
        throw error
      }
      // Full once the listener has queued that connection: the client's side is connected before
      // its last ACK reaches the listener (on a loaded machine, later), and a SYN that comes
      // before that finds room, or a SYN cookie, and connects.
      var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
      guard poll(&entry, 1, 10_000) == 1 else {
        Glibc.close(pending)
        Glibc.close(listener)
        throw POSIXError(.ETIMEDOUT, userInfo: [NSLocalizedDescriptionKey: "the backlog never filled"])
      }
      self.host = host
      self.port = chosen
      self.listener = listener
      self.pending = pending
    }

    deinit {
      Glibc.close(pending)
      Glibc.close(listener)
    }

    /// The socket address of `host` (a numeric address) and `port`.
    private static func address(
      _ host: String, port: Int, family: Int32
    ) throws -> (storage: sockaddr_storage, length: socklen_t) {
      var storage = sockaddr_storage()
      let length: socklen_t
      let parsed = withUnsafeMutableBytes(of: &storage) { bytes -> Int32 in
        if family == AF_INET6 {
          let address = bytes.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
          address.pointee.sin6_family = sa_family_t(AF_INET6)
          address.pointee.sin6_port = UInt16(port).bigEndian
          return inet_pton(AF_INET6, host, &address.pointee.sin6_addr)
        } else {
          let address = bytes.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
          address.pointee.sin_family = sa_family_t(AF_INET)
          address.pointee.sin_port = UInt16(port).bigEndian
          return inet_pton(AF_INET, host, &address.pointee.sin_addr)
        }
      }
      guard parsed == 1 else { throw POSIXError(.EINVAL) }
      length = socklen_t(
        family == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
      return (storage, length)
    }
  }

  extension POSIXError {
    /// The error `errno` says, for `what`.
    static func current(_ what: String) -> POSIXError {
      POSIXError(
        POSIXErrorCode(rawValue: errno) ?? .EIO, userInfo: [NSLocalizedDescriptionKey: "\(what) failed"])
    }
  }

  /// The number of this process's TCP sockets (IPv4 and IPv6) connecting to `port`: in the
  /// `SYN_SENT` state, their handshake not answered.
  ///
  /// Read from `/proc/net/tcp` and `/proc/net/tcp6`, keeping the sockets whose inode one of
  /// `/proc/self/fd` names (other processes on the machine may connect to the same port). A
  /// socket appears there from its `connect` and leaves it when it is closed (a closed
  /// `SYN_SENT` socket leaves no `TIME_WAIT`), so the count says whether a transfer has reached
  /// its connect, and whether it has let go of it.
  func connectingSockets(toPort port: Int) -> Int {
    let synSent = "02"
    var inodes: Set<Substring> = []
    for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
      guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"),
        target.hasPrefix("socket:[")
      else { continue }
      inodes.insert(Substring(target.dropFirst(8).dropLast()))
    }
    var count = 0
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
      for line in readProcFile(table).split(separator: "\n").dropFirst() {
        // sl, local address, remote address, state, queues, timer, retransmits, uid, timeout, inode
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count > 9, fields[3] == synSent, inodes.contains(fields[9]),
          let colon = fields[2].lastIndex(of: ":"),
          Int(fields[2][fields[2].index(after: colon)...], radix: 16) == port
        else { continue }
        count += 1
      }
    }
    return count
  }

  /// The whole text of a file under `/proc`, read to its end.
  ///
  /// `String(contentsOfFile:)` is not used: such a file reports a size of 0, and a long one
  /// (`/proc/net/tcp` while other tests hold many connections) was seen cut to its first lines.
  private func readProcFile(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
      if count < 0, errno == EINTR { continue }
      guard count > 0 else { break }
      bytes += chunk[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
  }
#endif
