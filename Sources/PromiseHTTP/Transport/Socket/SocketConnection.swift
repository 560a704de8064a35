import Foundation
import Promises

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

#if canImport(Glibc)
  /// A TCP connection of the socket transport: a set-up, then blocking reads and writes, each
  /// bounded by an idle timeout, that another thread can stop at any moment with `stop()`.
  ///
  /// Errors are `URLError`s with the codes FoundationNetworking gives the same faults, so the
  /// client's retry policy and error texts treat both transports alike.
  final class SocketConnection: Sendable {
    /// The descriptors (`nil` once closed) and whether `stop()` was called.
    ///
    /// All under the lock, so that `stop()` never shuts down or signals a descriptor number the
    /// kernel gave to another file after `close()`.
    private struct State {
      /// The socket: the one being connected during the set-up, then the connected one.
      var descriptor: Int32?
      /// The wake-up pair (a Unix socket pair): every `poll` watches `wake.reader` beside the
      /// socket, and `stop()` shuts `wake.writer` down, which makes the reader readable for good.
      ///
      /// A connecting socket needs it: `shutdown()` of a socket still in its handshake is no
      /// portable wake-up. Linux resets it, and the wait ends as if refused (`ECONNRESET`, not a
      /// stop); a system that answers `ENOTCONN` leaves the `poll` waiting out the whole set-up.
      var wake: (reader: Int32, writer: Int32)?
      var stopped = false
    }
    private let state = LockedBox(State())
    /// The TLS connection over the socket once `startTLS` has begun it; `nil` for plain HTTP.
    ///
    /// Only the thread that connects, sends and receives uses it (`TLSStream`); the box makes
    /// handing it over safe, and `close()` lets it go.
    private let tls = LockedBox<TLSStream?>(nil)
    /// How long a read, a write or the connection set-up may wait without progress; the request
    /// that takes a kept-alive connection sets its own (`use(idleTimeout:)`).
    private let timeout: LockedBox<TimeInterval>
    var idleTimeout: TimeInterval { timeout.load() }

    /// Creates a connection that is not connected yet: `connect(host:port:)` connects it, and
    /// `stop()` can interrupt that from another thread.
    init(idleTimeout: TimeInterval) {
      self.timeout = LockedBox(idleTimeout)
    }

    /// Sets the idle timeout of the request that takes the connection from the pool.
    func use(idleTimeout: TimeInterval) {
      timeout.withLock { $0 = idleTimeout }
    }

    /// Whether an idle, connected connection has nothing to read: the server has neither closed
    /// it nor sent anything (bytes nobody asked for would be read as the next answer).
    var isQuietWhileIdle: Bool {
      let (fd, stopped) = state.withLock { ($0.descriptor, $0.stopped) }
      guard let fd, !stopped else { return false }
      if let stream = tls.load(), stream.hasPendingBytes { return false }
      var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
      while true {
        let ready = poll(&entry, 1, 0)
        if ready < 0, errno == EINTR { continue }
        return ready == 0
      }
    }

    deinit {
      close()
    }

    /// Whether `stop()` was called.
    var isStopped: Bool { state.withLock { $0.stopped } }

    /// An address to connect to: a copy of one the resolver gave.
    struct Address {
      fileprivate var storage = sockaddr_storage()
      fileprivate var length: socklen_t = 0
      fileprivate var family: Int32 = 0
      fileprivate var type: Int32 = 0
      fileprivate var `protocol`: Int32 = 0
    }

    /// Returns the addresses of `host`:`port`, in the resolver's order.
    ///
    /// The lookup (`getaddrinfo`) cannot be interrupted: a `stop()` meanwhile takes effect when it
    /// returns.
    ///
    /// - Throws: `URLError` `.cannotFindHost` when the name does not resolve.
    static func resolve(host: String, port: Int) throws(URLError) -> [Address] {
      var hints = addrinfo()
      hints.ai_family = AF_UNSPEC
      hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
      hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG
      var list: UnsafeMutablePointer<addrinfo>?
      let status = getaddrinfo(host, String(port), &hints, &list)
      guard status == 0, let first = list else {
        // libcurl's words (FoundationNetworking's error), with the resolver's reason after them.
        let reason = String(cString: gai_strerror(status))
        throw URLError(
          .cannotFindHost,
          userInfo: [NSLocalizedDescriptionKey: "Could not resolve host: \(host) (\(reason))"])
      }
      defer { freeaddrinfo(first) }
      var addresses: [Address] = []
      var entry: UnsafeMutablePointer<addrinfo>? = first
      while let info = entry?.pointee {
        entry = info.ai_next
        guard let source = info.ai_addr, Int(info.ai_addrlen) <= MemoryLayout<sockaddr_storage>.size else {
          continue
        }
        var address = Address()
        withUnsafeMutableBytes(of: &address.storage) { target in
          target.copyMemory(from: UnsafeRawBufferPointer(start: source, count: Int(info.ai_addrlen)))
        }
        address.length = info.ai_addrlen
        address.family = info.ai_family
        address.type = info.ai_socktype
        address.protocol = info.ai_protocol
        addresses.append(address)
      }
      return addresses
    }

    /// The 4 or 16 bytes of `host` if it is an IPv4 or IPv6 address (without brackets), else
    /// `nil`.
    static func addressBytes(ofLiteral host: String) -> [UInt8]? {
      var v4 = in_addr()
      if inet_pton(AF_INET, host, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
      var v6 = in6_addr()
      if inet_pton(AF_INET6, host, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
      return nil
    }

    /// The 4 or 16 bytes of the first address the resolver gives for `host`, as a SOCKS5
    /// request carries it.
    ///
    /// - Throws: `URLError` `.cannotFindHost` when the name does not resolve.
    static func addressBytes(resolving host: String, port: Int) throws(URLError) -> [UInt8] {
      for var address in try resolve(host: host, port: port) {
        switch address.family {
        case AF_INET:
          return withUnsafeBytes(of: &address.storage) { Array($0[4..<8]) }
        case AF_INET6:
          return withUnsafeBytes(of: &address.storage) { Array($0[8..<24]) }
        default:
          continue
        }
      }
      throw URLError(
        .cannotFindHost, userInfo: [NSLocalizedDescriptionKey: "Could not resolve host: \(host)"])
    }

    /// Connects to `host`:`port`, trying each address the resolver gives in turn (see
    /// `connect(to:host:port:)` for how the time is shared).
    ///
    /// - Throws: `URLError` `.cannotFindHost` when the name does not resolve,
    ///   `.cannotConnectToHost` when no address accepts, `.timedOut` when the last one tried
    ///   took too long, `.cancelled` once stopped.
    func connect(host: String, port: Int) throws(URLError) {
      if isStopped { throw URLError(.cancelled) }
      let addresses = try Self.resolve(host: host, port: port)
      try connect(to: addresses, host: host, port: port)
    }

    /// Connects to the first of `addresses` that accepts, trying them in order; `host` and
    /// `port` name them in errors.
    ///
    /// The time: the whole set-up waits at most `idleTimeout` (it makes no progress before it
    /// connects). While another address is left to try, an address gets half of the time that
    /// remains, and the last one gets all of it, as libcurl shares its connect timeout: one
    /// address that does not answer (a black-holed IPv6 route, a full backlog) cannot take the
    /// time of those after it, and a refused one takes next to none. The request's own deadline
    /// and a cancellation end the set-up through `stop()`, which wakes the wait at once, and no
    /// later address is tried.
    ///
    /// - Throws: `URLError` `.cannotConnectToHost` when no address accepts, `.timedOut` when the
    ///   last one tried took too long — each naming `host` and `port` as libcurl does —, and
    ///   `.cancelled` once stopped.
    func connect(to addresses: [Address], host: String, port: Int) throws(URLError) {
      let start = DispatchTime.now().uptimeNanoseconds
      let budget = max(0, min(idleTimeout, 1e9))
      func elapsed() -> TimeInterval { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
      func failure(_ code: URLError.Code, _ reason: String) -> URLError {
        // libcurl's form ("Failed to connect to localhost port 8080 after 3 ms: …"), which
        // names the host as the URL does (never its user-info) and the port.
        let milliseconds = Int(elapsed() * 1000)
        let name = host.contains(":") ? "[\(host)]" : host
        return URLError(
          code,
          userInfo: [
            NSLocalizedDescriptionKey:
              "Failed to connect to \(name) port \(port) after \(milliseconds) ms: \(reason)"
          ])
      }
      guard !addresses.isEmpty else { throw failure(.cannotFindHost, "No address for the host") }
      try makeWakePair()
      var last = failure(.cannotConnectToHost, "No address accepted the connection")
      for (index, address) in addresses.enumerated() {
        let remaining = budget - elapsed()
        // Out of time after earlier addresses took theirs: the last failure stands.
        guard index == 0 || remaining > 0 else { break }
        let allowance = index < addresses.count - 1 ? remaining / 2 : remaining
        switch attempt(address, timeout: allowance) {
        case .connected:
          return
        case .stopped:
          throw URLError(.cancelled)
        case .timedOut:
          last = failure(.timedOut, "Connection timed out")
        case .failed(let code, let errno):
          last = failure(code, String(cString: strerror(errno)))
        }
      }
      throw last
    }

    /// Starts TLS over the connected socket and completes the handshake with `host`.
    ///
    /// See `TLSStream`. The certificate chain verified against `context`'s trust, the name or
    /// address `host` checked, and `host`'s pins if it has any. Sends and receives go through
    /// TLS afterwards.
    ///
    /// The handshake waits at most `idleTimeout` for each step, and `stop()` ends it at once.
    ///
    /// - Throws: `URLError` `.serverCertificateUntrusted`, `.serverCertificateHasBadDate`,
    ///   `.serverCertificateNotYetValid` or `.serverCertificateHasUnknownRoot` for a certificate
    ///   that fails verification (naming `host` and the reason), `.secureConnectionFailed` for
    ///   any other handshake failure, `.timedOut`, `.cancelled` once stopped.
    func startTLS(host: String, context: TLSContext) throws(URLError) {
      let (fd, wake) = try descriptors()
      let stream = try TLSStream(context: context, socket: fd, host: host)
      tls.withLock { $0 = stream }
      while true {
        switch stream.handshake() {
        case .done:
          if let code = stream.verificationError { throw stream.certificateError(code) }
          try stream.checkPins()
          return
        case .wants(let want):
          try waitForTLS(want, fd: fd, wake: wake)
        case .failed(let code, let reason):
          if isStopped { throw URLError(.cancelled) }
          if let verification = stream.verificationError { throw stream.certificateError(verification) }
          let cause =
            reason ?? (code != 0 ? String(cString: strerror(code)) : "the server closed the connection")
          let name = host.contains(":") ? "[\(host)]" : host
          if let reason,
            let refused = TLSStream.clientCertificateFailure(
              reason: reason, detail: "TLS connect error with \(name): \(cause)")
          {
            throw refused
          }
          throw URLError(
            .secureConnectionFailed,
            userInfo: [NSLocalizedDescriptionKey: "TLS connect error with \(name): \(cause)"])
        }
      }
    }

    /// Waits until the socket is ready for what TLS wants, at most `idleTimeout`.
    private func waitForTLS(_ want: TLSStream.Want, fd: Int32, wake: Int32) throws(URLError) {
      let events = want == .read ? Int16(POLLIN) : Int16(POLLOUT)
      switch Self.wait(fd, wake: wake, for: events, timeout: idleTimeout) {
      case .ready: return
      case .stopped: throw URLError(.cancelled)
      case .timedOut: throw try timedOut()
      }
    }

    /// Makes the wake-up pair `stop()` signals, unless stopped already.
    private func makeWakePair() throws(URLError) {
      var pair: [Int32] = [-1, -1]
      let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
      guard socketpair(AF_UNIX, type, 0, &pair) == 0 else {
        throw Self.failure(.cannotConnectToHost, errno: errno, doing: "Could not create a socket pair")
      }
      let (kept, stopped) = state.withLock { state in
        guard state.wake == nil else { return (false, state.stopped) }
        state.wake = (pair[0], pair[1])
        return (true, state.stopped)
      }
      if !kept {
        Glibc.close(pair[0])
        Glibc.close(pair[1])
      }
      if stopped { throw URLError(.cancelled) }
    }

    /// How one address's attempt ended.
    private enum Attempt {
      case connected
      case stopped
      case timedOut
      /// Refused or unreachable: `code` for the `URLError`, `errno` for the reason.
      case failed(URLError.Code, errno: Int32)
    }

    /// Opens a non-blocking socket to `address` and waits at most `timeout` for it to connect.
    ///
    /// The socket is the connection's from before `connect(2)`, so that `stop()` reaches it; it
    /// is closed again if it does not connect.
    private func attempt(_ address: Address, timeout: TimeInterval) -> Attempt {
      let type = address.type | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
      let fd = socket(address.family, type, address.protocol)
      guard fd >= 0 else { return .failed(.cannotConnectToHost, errno: errno) }
      var on: Int32 = 1
      _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
      // A stopped connection starts no connect: checked under the lock that `stop()` takes.
      let wake: Int32? = state.withLock { state in
        guard !state.stopped, let wake = state.wake else { return nil }
        state.descriptor = fd
        return wake.reader
      }
      guard let wake else {
        Glibc.close(fd)
        return .stopped
      }
      var storage = address.storage
      let started = withUnsafePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, address.length) }
      }
      if started == 0 { return .connected }
      var code = errno
      if code == EINPROGRESS || code == EINTR {
        switch Self.wait(fd, wake: wake, for: Int16(POLLOUT), timeout: timeout) {
        case .stopped:
          // Closed with the connection.
          return .stopped
        case .timedOut:
          code = ETIMEDOUT
        case .ready:
          var result: Int32 = 0
          var length = socklen_t(MemoryLayout<Int32>.size)
          _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &length)
          if result == 0 { return .connected }
          code = result
        }
      }
      // Not connected: the socket is given up under the lock, so `stop()` no longer sees it.
      state.withLock { $0.descriptor = nil }
      Glibc.close(fd)
      return code == ETIMEDOUT ? .timedOut : .failed(.cannotConnectToHost, errno: code)
    }

    /// Sends all of `bytes`.
    ///
    /// While the socket's send buffer is full, `flowing` is called whenever the peer has taken
    /// some of it (the buffer's unacknowledged bytes went down): the kernel lets a writer go on
    /// only once half of a large buffer is free, which over a slow reader can take seconds of a
    /// transfer that never stopped. The idle timeout counts from the last such sign of life.
    ///
    /// - Throws: `URLError` `.networkConnectionLost` when the peer has gone, `.timedOut` when it
    ///   takes nothing for `idleTimeout`, `.cancelled` once stopped.
    func send(_ bytes: UnsafeRawBufferPointer, flowing: () -> Void = {}) throws(URLError) {
      if let stream = tls.load() { return try send(bytes, over: stream, flowing: flowing) }
      var offset = 0
      while offset < bytes.count {
        let (fd, wake) = try descriptors()
        let sent = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
        if sent > 0 {
          offset += sent
          continue
        }
        let code = errno
        if sent < 0, code == EINTR { continue }
        if sent < 0, code == EAGAIN || code == EWOULDBLOCK {
          switch Self.waitToSend(
            fd, wake: wake, timeout: idleTimeout, watchingAnswers: true, flowing: flowing)
          {
          case .writable:
            continue
          case .stopped:
            throw URLError(.cancelled)
          case .answered:
            switch Self.skipInterimResponses(fd, wake: wake, timeout: idleTimeout) {
            case .interim:
              // Only interim (1xx) responses, a `100 Continue` say: the server still wants the body.
              continue
            case _ where isStopped:
              throw URLError(.cancelled)
            case .answer:
              // The server answered (a 413, say) without reading the rest: the caller reads it.
              throw Self.sendCutShort(byAnAnswer: true)
            case .closed:
              // The server closed its side, perhaps without a word: the caller reads what it sent.
              throw Self.sendCutShort(byAnAnswer: false)
            case .failed(let code):
              throw Self.failure(.networkConnectionLost, errno: code, doing: "Send failure")
            }
          case .idle:
            throw try timedOut()
          }
        }
        if isStopped { throw URLError(.cancelled) }
        throw Self.failure(.networkConnectionLost, errno: code, doing: "Send failure")
      }
    }

    /// The error of a send that the server cut short, by answering (a 413, say) or by closing
    /// its side, before the whole body was sent; the caller then reads what the server sent.
    private static func sendCutShort(byAnAnswer answered: Bool) -> URLError {
      URLError(
        .networkConnectionLost,
        userInfo: [
          NSLocalizedDescriptionKey: answered
            ? "The server answered before the whole body was sent"
            : "The server closed the connection before the whole body was sent"
        ])
    }

    /// Sends all of `bytes` through TLS.
    ///
    /// As over plain TCP: a response that arrives while the body is being sent ends the send
    /// (its bytes, decrypted to be looked at, are kept for the reader), interim (1xx) responses
    /// and TLS's own messages (session tickets) do not. A server that stops reading without
    /// answering fails the send after `idleTimeout` without progress, or when it closes.
    private func send(
      _ bytes: UnsafeRawBufferPointer, over stream: TLSStream, flowing: () -> Void
    ) throws(URLError) {
      var offset = 0
      while offset < bytes.count {
        let (fd, wake) = try descriptors()
        switch stream.write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
        case .done(let count):
          offset += count
        case .wants(.write):
          switch Self.waitToSend(
            fd, wake: wake, timeout: idleTimeout, watchingAnswers: true, flowing: flowing)
          {
          case .writable: continue
          case .answered:
            switch stream.readAnswerEarly() {
            case .none:
              continue
            case _ where isStopped:
              throw URLError(.cancelled)
            case .answer:
              throw Self.sendCutShort(byAnAnswer: true)
            case .closed:
              throw Self.sendCutShort(byAnAnswer: false)
            case .failed(let code, let reason):
              throw Self.tlsFailure("Send", code: code, reason: reason)
            }
          case .stopped: throw URLError(.cancelled)
          case .idle: throw try timedOut()
          }
        case .wants(.read):
          try waitForTLS(.read, fd: fd, wake: wake)
        case .failed(let code, let reason):
          if isStopped { throw URLError(.cancelled) }
          // The server's alert, when it sent one before it closed, says why better than the reset.
          throw Self.tlsFailure("Send", code: code, reason: stream.alertAfterFailedWrite() ?? reason)
        }
      }
    }

    /// The error of a TLS read or write (`what`: "Send" or "Recv", in libcurl's words) that
    /// failed with `errno` `code` or OpenSSL's `reason`.
    ///
    /// A server that wants a client certificate and got none, or does not accept the one it got,
    /// ends TLS 1.3 with an alert after the handshake, so it arrives here rather than in
    /// `startTLS(host:context:)`: that is `.clientCertificateRequired` or
    /// `.clientCertificateRejected` (never retried), not a lost connection.
    private static func tlsFailure(_ what: String, code: Int32, reason: String?) -> URLError {
      let cause = reason ?? (code != 0 ? String(cString: strerror(code)) : "connection closed")
      if let reason,
        let refused = TLSStream.clientCertificateFailure(reason: reason, detail: "\(what) failure: \(cause)")
      {
        return refused
      }
      return URLError(
        .networkConnectionLost, userInfo: [NSLocalizedDescriptionKey: "\(what) failure: \(cause)"])
    }

    /// Sends all of `bytes` (see `send(_:)` for the errors).
    func send(contentsOf bytes: some ContiguousBytes, flowing: () -> Void = {}) throws(URLError) {
      try bytes.withUnsafeBytes { buffer in
        Result { () throws(URLError) in try send(buffer, flowing: flowing) }
      }
      .get()
    }

    /// Reads at most `buffer.count` bytes into `buffer`; returns 0 at the end of the stream.
    ///
    /// - Throws: `URLError` `.networkConnectionLost` when the connection is reset, `.timedOut`
    ///   when nothing arrives for `idleTimeout`, `.cancelled` once stopped.
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(URLError) -> Int {
      if let stream = tls.load() { return try receive(into: buffer, over: stream) }
      while true {
        let (fd, wake) = try descriptors()
        let count = Glibc.recv(fd, buffer.baseAddress!, buffer.count, 0)
        if count >= 0 {
          // A stop shuts the socket down, which reads as the end of the stream.
          if count == 0, isStopped { throw URLError(.cancelled) }
          return count
        }
        let code = errno
        if code == EINTR { continue }
        if code == EAGAIN || code == EWOULDBLOCK {
          switch Self.wait(fd, wake: wake, for: Int16(POLLIN), timeout: idleTimeout) {
          case .ready: continue
          case .stopped: throw URLError(.cancelled)
          case .timedOut: throw try timedOut()
          }
        }
        if isStopped { throw URLError(.cancelled) }
        throw Self.failure(.networkConnectionLost, errno: code, doing: "Recv failure")
      }
    }

    /// Reads through TLS (see `receive(into:)`); a stream that ends without TLS's close_notify
    /// ends as a closed socket does.
    private func receive(into buffer: UnsafeMutableRawBufferPointer, over stream: TLSStream) throws(URLError)
      -> Int
    {
      while true {
        let (fd, wake) = try descriptors()
        switch stream.readAvailable(into: buffer) {
        case .done(let count):
          if count == 0, isStopped { throw URLError(.cancelled) }
          return count
        case .wants(let want):
          try waitForTLS(want, fd: fd, wake: wake)
        case .failed(let code, let reason):
          if isStopped { throw URLError(.cancelled) }
          throw Self.tlsFailure("Recv", code: code, reason: reason)
        }
      }
    }

    /// Stops the connection from any thread: the set-up, a read or write in progress, and every
    /// later one, fail with `URLError(.cancelled)`.
    ///
    /// It wakes any wait on the socket through the wake-up pair, and shuts the socket down, so
    /// that the peer learns at once that nothing more is coming.
    func stop() {
      state.withLock { state in
        state.stopped = true
        if let wake = state.wake { _ = shutdown(wake.writer, Int32(SHUT_WR)) }
        if let fd = state.descriptor { _ = shutdown(fd, Int32(SHUT_RDWR)) }
      }
    }

    /// Closes the descriptors; later calls do nothing.
    func close() {
      // Released after the lock: freeing the `SSL` does not touch the socket.
      let stream = tls.exchange(nil)
      let (fd, wake, stopped) = state.withLock { state in
        defer {
          state.descriptor = nil
          state.wake = nil
        }
        return (state.descriptor, state.wake, state.stopped)
      }
      // TLS says goodbye before the socket goes (a stopped socket is shut down already).
      if fd != nil, !stopped { stream?.sendCloseNotify() }
      _ = stream
      if let fd { _ = Glibc.close(fd) }
      if let wake {
        _ = Glibc.close(wake.reader)
        _ = Glibc.close(wake.writer)
      }
    }

    /// The connected socket and the wake-up pair's reader.
    private func descriptors() throws(URLError) -> (socket: Int32, wake: Int32) {
      let (fd, wake, stopped) = state.withLock { ($0.descriptor, $0.wake?.reader, $0.stopped) }
      guard let fd, let wake, !stopped else { throw URLError(.cancelled) }
      return (fd, wake)
    }

    private func timedOut() throws(URLError) -> URLError {
      if isStopped { throw URLError(.cancelled) }
      return URLError(
        .timedOut,
        userInfo: [
          NSLocalizedDescriptionKey: "Operation timed out after \(Int(idleTimeout * 1000)) milliseconds"
        ])
    }

    /// What a sender waiting on a full send buffer found.
    private enum SendWait {
      /// The socket takes more bytes (or has failed: the next send says how).
      case writable
      /// The server sent something (its response) while the request's body was being sent.
      case answered
      /// The peer took nothing for a whole idle timeout.
      case idle
      /// The connection was stopped.
      case stopped
    }

    /// Waits until `fd` can take more bytes or has something to read, or until the peer took
    /// nothing for `timeout` seconds.
    ///
    /// With `watchingAnswers` false, only the first. Checks the bytes not yet acknowledged
    /// (`TIOCOUTQ`) every 100 ms and calls
    /// `flowing` when they went down.
    private static func waitToSend(
      _ fd: Int32, wake: Int32, timeout: TimeInterval, watchingAnswers: Bool, flowing: () -> Void
    ) -> SendWait {
      let events = watchingAnswers ? Int16(POLLOUT) | Int16(POLLIN) : Int16(POLLOUT)
      let limit = UInt64(max(0, min(timeout, 1e9)) * 1e9)
      var lastLife = DispatchTime.now().uptimeNanoseconds
      var queued = unacknowledged(fd)
      while true {
        switch wait(fd, wake: wake, for: events, timeout: min(timeout, 0.1)) {
        case .ready(let events): return events & Int16(POLLIN) != 0 ? .answered : .writable
        case .stopped: return .stopped
        case .timedOut: break
        }
        let now = unacknowledged(fd)
        if let before = queued, let now, now < before {
          flowing()
          lastLife = DispatchTime.now().uptimeNanoseconds
        }
        queued = now ?? queued
        if DispatchTime.now().uptimeNanoseconds - lastLife >= limit { return .idle }
      }
    }

    /// What is waiting on a socket whose body is being sent, once interim responses are read.
    private enum Incoming {
      /// Interim (1xx) responses, read away: nothing else has arrived.
      case interim
      /// Bytes of a final response (or of something that is not one), left for the reader.
      case answer
      /// The end of the stream: the server closed its side, after its interim responses if any.
      case closed
      /// Reading failed with this `errno` (a reset, say).
      case failed(Int32)
    }

    /// Reads away the interim (1xx) responses waiting on `fd` while a body is being sent, and
    /// says what is there after them, left unread for the response's reader.
    ///
    /// A head still arriving is waited for, at most `timeout`.
    private static func skipInterimResponses(_ fd: Int32, wake: Int32, timeout: TimeInterval) -> Incoming {
      let deadline = DispatchTime.now().uptimeNanoseconds &+ UInt64(max(0, min(timeout, 1e9)) * 1e9)
      return withUnsafeTemporaryAllocation(byteCount: HTTP1ResponseHead.maximumSize, alignment: 1) { buffer in
        while true {
          let peeked = recv(fd, buffer.baseAddress!, buffer.count, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
          let code = errno
          if peeked < 0, code == EINTR { continue }
          // Nothing to read after all: go on sending.
          if peeked < 0, code == EAGAIN || code == EWOULDBLOCK { return .interim }
          if peeked < 0 { return .failed(code) }
          if peeked == 0 { return .closed }
          let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<peeked])
          guard let length = HTTP1ResponseHead.end(in: bytes) else {
            // Part of a head: wait for the rest, unless it cannot fit or time is up.
            guard peeked < buffer.count, DispatchTime.now().uptimeNanoseconds < deadline else {
              return .answer
            }
            if case .stopped = wait(fd, wake: wake, for: Int16(POLLIN), timeout: 0.1) { return .answer }
            continue
          }
          guard let head = try? HTTP1ResponseHead.parse(UnsafeRawBufferPointer(rebasing: bytes[..<length])),
            (100..<200).contains(head.statusCode), head.statusCode != 101
          else { return .answer }
          // Consume the interim head, then look at what follows it.
          var consumed = 0
          while consumed < length {
            let count = recv(fd, buffer.baseAddress!, length - consumed, 0)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return .answer }
            consumed += count
          }
        }
      }
    }

    /// The bytes sent on `fd` that the peer has not acknowledged, where the system says.
    private static func unacknowledged(_ fd: Int32) -> Int32? {
      #if canImport(Glibc)
        var count: Int32 = 0
        return withUnsafeMutablePointer(to: &count) { ioctl(fd, UInt(TIOCOUTQ), $0) } == 0 ? count : nil
      #else
        return nil
      #endif
    }

    /// What a wait on a socket found.
    private enum Readiness {
      /// The socket reported these events (or the poll failed: the next call says why).
      case ready(Int16)
      /// `stop()` was called.
      case stopped
      /// Nothing happened for the whole timeout.
      case timedOut
    }

    /// Waits until `fd` is ready for `events` (or has failed, or was shut down), or until `wake`
    /// (the wake-up pair's reader) says the connection was stopped, at most `timeout` seconds.
    ///
    /// One `poll` of both descriptors: waking adds no system call to a read or a write.
    private static func wait(_ fd: Int32, wake: Int32, for events: Int16, timeout: TimeInterval) -> Readiness
    {
      let deadline = DispatchTime.now().uptimeNanoseconds &+ UInt64(max(0, min(timeout, 1e9)) * 1e9)
      return withUnsafeTemporaryAllocation(of: pollfd.self, capacity: 2) { entries in
        while true {
          let now = DispatchTime.now().uptimeNanoseconds
          guard now < deadline else { return .timedOut }
          // At most a day per poll: the milliseconds of a longer timeout overflow poll's Int32.
          let milliseconds = Int32(min((deadline - now) / 1_000_000 + 1, 86_400_000))
          entries[0] = pollfd(fd: fd, events: events, revents: 0)
          entries[1] = pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
          let ready = poll(entries.baseAddress!, 2, milliseconds)
          if ready > 0 { return entries[1].revents != 0 ? .stopped : .ready(entries[0].revents) }
          // A failed poll: the next read or write says why.
          if ready < 0, errno != EINTR { return .ready(events) }
        }
      }
    }

    /// A `URLError` with `code` and the system's words for `errno`.
    private static func failure(_ code: URLError.Code, errno: Int32, doing what: String) -> URLError {
      URLError(code, userInfo: [NSLocalizedDescriptionKey: "\(what): \(String(cString: strerror(errno)))"])
    }
  }
#else
  /// The socket transport needs Glibc; elsewhere `SocketTransportSettings` never chooses it,
  /// and this stand-in only keeps the package building.
  final class SocketConnection: Sendable {
    let idleTimeout: TimeInterval
    init(idleTimeout: TimeInterval) { self.idleTimeout = idleTimeout }
    var isStopped: Bool { true }
    var isQuietWhileIdle: Bool { false }
    func use(idleTimeout: TimeInterval) {}
    func connect(host: String, port: Int) throws(URLError) {
      throw URLError(.unsupportedURL)
    }
    static func addressBytes(ofLiteral host: String) -> [UInt8]? { nil }
    static func addressBytes(resolving host: String, port: Int) throws(URLError) -> [UInt8] {
      throw URLError(.unsupportedURL)
    }
    func send(_ bytes: UnsafeRawBufferPointer, flowing: () -> Void = {}) throws(URLError) {
      throw URLError(.unsupportedURL)
    }
    func send(contentsOf bytes: some ContiguousBytes, flowing: () -> Void = {}) throws(URLError) {
      throw URLError(.unsupportedURL)
    }
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(URLError) -> Int {
      throw URLError(.unsupportedURL)
    }
    func startTLS(host: String, context: TLSContext) throws(URLError) {
      throw URLError(.unsupportedURL)
    }
    func stop() {}
    func close() {}
  }
#endif
