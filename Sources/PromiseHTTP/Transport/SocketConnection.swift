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
  /// A TCP connection of the socket transport: blocking reads and writes, each bounded by an idle
  /// timeout, that another thread can stop at any moment with `stop()`.
  ///
  /// Errors are `URLError`s with the codes FoundationNetworking gives the same faults, so the
  /// client's retry policy and error texts treat both transports alike.
  final class SocketConnection: Sendable {
    /// The descriptor (`nil` once closed) and whether `stop()` was called.
    ///
    /// Both under the lock, so that `stop()` never shuts down a descriptor number the kernel gave to another
    /// file after `close()`.
    private struct State {
      var descriptor: Int32?
      var stopped = false
    }
    private let state = LockedBox(State())
    /// How long a read, a write or the connection set-up may wait without progress.
    let idleTimeout: TimeInterval

    private init(descriptor: Int32, idleTimeout: TimeInterval) {
      state.withLock { $0.descriptor = descriptor }
      self.idleTimeout = idleTimeout
    }

    deinit {
      close()
    }

    /// Whether `stop()` was called.
    var isStopped: Bool { state.withLock { $0.stopped } }

    /// Connects to `host`:`port`, trying each address the resolver gives in turn.
    ///
    /// - Throws: `URLError` `.cannotFindHost` when the name does not resolve,
    ///   `.cannotConnectToHost` when no address accepts, `.timedOut` past `idleTimeout`.
    static func connect(host: String, port: Int, idleTimeout: TimeInterval) throws(URLError)
      -> SocketConnection
    {
      var hints = addrinfo()
      hints.ai_family = AF_UNSPEC
      #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
      #else
        hints.ai_socktype = SOCK_STREAM
      #endif
      hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG
      var list: UnsafeMutablePointer<addrinfo>?
      let status = getaddrinfo(host, String(port), &hints, &list)
      guard status == 0, let first = list else {
        let text = String(cString: gai_strerror(status))
        throw URLError(
          .cannotFindHost, userInfo: [NSLocalizedDescriptionKey: "Could not resolve host: \(text)"])
      }
      defer { freeaddrinfo(first) }
      var failure = URLError(.cannotConnectToHost)
      var entry: UnsafeMutablePointer<addrinfo>? = first
      while let address = entry {
        entry = address.pointee.ai_next
        do {
          let fd = try open(address.pointee, idleTimeout: idleTimeout)
          return SocketConnection(descriptor: fd, idleTimeout: idleTimeout)
        } catch {
          failure = error
          if error.code == .timedOut { break }
        }
      }
      throw failure
    }

    /// Opens a non-blocking socket to `address` and waits for it to connect.
    private static func open(_ address: addrinfo, idleTimeout: TimeInterval) throws(URLError) -> Int32 {
      #if canImport(Glibc)
        let type = address.ai_socktype | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
      #else
        let type = address.ai_socktype
      #endif
      let fd = socket(address.ai_family, type, address.ai_protocol)
      guard fd >= 0 else {
        throw failure(.cannotConnectToHost, errno: errno, doing: "Could not create a socket")
      }
      #if !canImport(Glibc)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
      #endif
      var on: Int32 = 1
      _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
      if Glibc.connect(fd, address.ai_addr, address.ai_addrlen) != 0 {
        let code = errno
        guard code == EINPROGRESS else {
          Glibc.close(fd)
          throw failure(.cannotConnectToHost, errno: code, doing: "Failed to connect")
        }
        guard wait(fd, for: Int16(POLLOUT), timeout: idleTimeout) != nil else {
          Glibc.close(fd)
          throw URLError(.timedOut, userInfo: [NSLocalizedDescriptionKey: "Connection timed out"])
        }
        var result: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &length)
        if result != 0 {
          Glibc.close(fd)
          throw failure(.cannotConnectToHost, errno: result, doing: "Failed to connect")
        }
      }
      return fd
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
      var offset = 0
      while offset < bytes.count {
        let fd = try descriptor()
        let sent = Glibc.send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
        if sent > 0 {
          offset += sent
          continue
        }
        let code = errno
        if sent < 0, code == EINTR { continue }
        if sent < 0, code == EAGAIN || code == EWOULDBLOCK {
          switch Self.waitToSend(fd, timeout: idleTimeout, flowing: flowing) {
          case .writable:
            continue
          case .answered where Self.skipInterimResponses(fd, timeout: idleTimeout):
            // Only interim (1xx) responses, a `100 Continue` say: the server still wants the body.
            continue
          case .answered:
            // The server answered (a 413, say) without reading the rest: the caller reads it.
            throw URLError(
              .networkConnectionLost,
              userInfo: [NSLocalizedDescriptionKey: "The server answered before the whole body was sent"])
          case .idle:
            throw try timedOut()
          }
        }
        if isStopped { throw URLError(.cancelled) }
        throw Self.failure(.networkConnectionLost, errno: code, doing: "Send failure")
      }
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
      while true {
        let fd = try descriptor()
        let count = Glibc.recv(fd, buffer.baseAddress!, buffer.count, 0)
        if count >= 0 {
          // A stop shuts the socket down, which reads as the end of the stream.
          if count == 0, isStopped { throw URLError(.cancelled) }
          return count
        }
        let code = errno
        if code == EINTR { continue }
        if code == EAGAIN || code == EWOULDBLOCK {
          guard Self.wait(fd, for: Int16(POLLIN), timeout: idleTimeout) != nil else { throw try timedOut() }
          continue
        }
        if isStopped { throw URLError(.cancelled) }
        throw Self.failure(.networkConnectionLost, errno: code, doing: "Recv failure")
      }
    }

    /// Stops the connection from any thread: a read or write in progress, and every later one,
    /// fails with `URLError(.cancelled)`.
    func stop() {
      state.withLock { state in
        state.stopped = true
        if let fd = state.descriptor { _ = shutdown(fd, Int32(SHUT_RDWR)) }
      }
    }

    /// Closes the descriptor; later calls do nothing.
    func close() {
      let fd = state.withLock { state in
        defer { state.descriptor = nil }
        return state.descriptor
      }
      if let fd { _ = Glibc.close(fd) }
    }

    private func descriptor() throws(URLError) -> Int32 {
      let (fd, stopped) = state.withLock { ($0.descriptor, $0.stopped) }
      guard let fd, !stopped else { throw URLError(.cancelled) }
      return fd
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
    }

    /// Waits until `fd` can take more bytes or has something to read, or until the peer took
    /// nothing for `timeout` seconds.
    ///
    /// Checks the bytes not yet acknowledged (`TIOCOUTQ`) every 100 ms and calls
    /// `flowing` when they went down.
    private static func waitToSend(_ fd: Int32, timeout: TimeInterval, flowing: () -> Void) -> SendWait {
      let limit = UInt64(max(0, min(timeout, 1e9)) * 1e9)
      var lastLife = DispatchTime.now().uptimeNanoseconds
      var queued = unacknowledged(fd)
      while true {
        if let events = wait(fd, for: Int16(POLLOUT) | Int16(POLLIN), timeout: min(timeout, 0.1)) {
          return events & Int16(POLLIN) != 0 ? .answered : .writable
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

    /// Reads away the interim (1xx) responses waiting on `fd` while a body is being sent; returns
    /// `true` if that is all there was, `false` if a final answer (or the end of the stream, or an
    /// error) is there, left unread for the response's reader.
    ///
    /// A head still arriving is waited for, at most `timeout`.
    private static func skipInterimResponses(_ fd: Int32, timeout: TimeInterval) -> Bool {
      let deadline = DispatchTime.now().uptimeNanoseconds &+ UInt64(max(0, min(timeout, 1e9)) * 1e9)
      return withUnsafeTemporaryAllocation(byteCount: HTTP1ResponseHead.maximumSize, alignment: 1) { buffer in
        while true {
          let peeked = recv(fd, buffer.baseAddress!, buffer.count, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
          if peeked < 0, errno == EINTR { continue }
          // Nothing to read after all: go on sending.
          if peeked < 0, errno == EAGAIN || errno == EWOULDBLOCK { return true }
          guard peeked > 0 else { return false }
          let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<peeked])
          guard let length = HTTP1ResponseHead.end(in: bytes) else {
            // Part of a head: wait for the rest, unless it cannot fit or time is up.
            guard peeked < buffer.count, DispatchTime.now().uptimeNanoseconds < deadline,
              wait(fd, for: Int16(POLLIN), timeout: 0.1) != nil
                || DispatchTime.now().uptimeNanoseconds < deadline
            else { return false }
            continue
          }
          guard let head = try? HTTP1ResponseHead.parse(UnsafeRawBufferPointer(rebasing: bytes[..<length])),
            (100..<200).contains(head.statusCode), head.statusCode != 101
          else { return false }
          // Consume the interim head, then look at what follows it.
          var consumed = 0
          while consumed < length {
            let count = recv(fd, buffer.baseAddress!, length - consumed, 0)
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
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

    /// Waits until `fd` is ready for `events` (or has failed, or was shut down) and returns the
    /// events it reports; `nil` after `timeout` seconds without any.
    @discardableResult
    private static func wait(_ fd: Int32, for events: Int16, timeout: TimeInterval) -> Int16? {
      let deadline = DispatchTime.now().uptimeNanoseconds &+ UInt64(max(0, min(timeout, 1e9)) * 1e9)
      while true {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now < deadline else { return nil }
        // At most a day per poll: the milliseconds of a longer timeout overflow poll's Int32.
        let milliseconds = Int32(min((deadline - now) / 1_000_000 + 1, 86_400_000))
        var entry = pollfd(fd: fd, events: events, revents: 0)
        let ready = poll(&entry, 1, milliseconds)
        if ready > 0 { return entry.revents }
        // A failed poll: the next read or write says why.
        if ready < 0, errno != EINTR { return events }
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
    var isStopped: Bool { true }
    static func connect(host: String, port: Int, idleTimeout: TimeInterval) throws(URLError)
      -> SocketConnection
    {
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
    func stop() {}
    func close() {}
  }
#endif
