import Foundation

/// An HTTP/1.1 server on loopback TCP sockets that can answer well or break on purpose.
///
/// It listens on `127.0.0.1` and on `127.0.0.2` (a second origin for cross-origin tests), each
/// on its own ephemeral port. Each connection gets its own thread with blocking IO; the
/// handler runs on that thread, so handlers run concurrently and a slow one blocks only its
/// own connection. Connections are kept alive between requests unless either side sends
/// `Connection: close`.
///
/// Call ``stop()`` when done (the deinitializer also does, but a handler that captures the
/// server keeps it alive until ``stop()``).
public final class LoopbackServer: Sendable {
  private let state: ServerState
  /// The port of the listener on `127.0.0.1`.
  public let port: Int
  /// The port of the listener on `127.0.0.2`.
  public let secondPort: Int

  /// Starts listening at once on 127.0.0.1 and 127.0.0.2, each on its own ephemeral port;
  /// every request body is read whole into ``RecordedRequest/body``.
  ///
  /// - Parameter handler: Called once per request, on the connection's thread, possibly
  ///   concurrently with other calls; returns what to do with the request.
  /// - Throws: ``LoopbackServerError`` when a socket cannot be opened or bound.
  public convenience init(handler: @escaping @Sendable (RecordedRequest) -> ServerAction) throws {
    try self.init(handler: handler, bodyHandling: { _ in .buffer })
  }

  /// Starts listening at once on 127.0.0.1 and 127.0.0.2, each on its own ephemeral port,
  /// reading each request's body as `bodyHandling` says.
  ///
  /// - Parameters:
  ///   - handler: Called once per request whose body has been read, on the connection's
  ///     thread, possibly concurrently with other calls; returns what to do with the request.
  ///   - bodyHandling: Called with each request's head (its ``RecordedRequest/body`` empty)
  ///     before any of its body is read; returns how to read it.
  /// - Throws: ``LoopbackServerError`` when a socket cannot be opened or bound.
  public init(
    handler: @escaping @Sendable (RecordedRequest) -> ServerAction,
    bodyHandling: @escaping @Sendable (RecordedRequest) -> RequestBodyHandling
  ) throws {
    let state = ServerState()
    let first = try Socket.listen(on: "127.0.0.1")
    let second: (fd: Int32, port: Int)
    do {
      second = try Socket.listen(on: "127.0.0.2")
    } catch {
      Socket.close(first.fd)
      throw error
    }
    self.state = state
    self.port = first.port
    self.secondPort = second.port
    for (listener, host) in [(first, "127.0.0.1"), (second, "127.0.0.2")] {
      guard state.adoptListener(listener.fd) else {
        Socket.close(listener.fd)
        continue
      }
      state.spawn(name: "LoopbackHTTPServer accept \(host):\(listener.port)") {
        Self.acceptLoop(
          listener: listener.fd, host: host, port: listener.port, state: state, handler: handler,
          bodyHandling: bodyHandling)
      }
    }
  }

  /// Starts a server that routes every request through `router` (its body handling included).
  public convenience init(router: Router) throws {
    try self.init(handler: router.handler, bodyHandling: router.bodyHandler)
  }

  deinit {
    stop()
  }

  /// Returns `http://127.0.0.1:<port>/`.
  public var baseURL: URL {
    URL(string: "http://127.0.0.1:\(port)/")!
  }

  /// Returns `http://127.0.0.2:<secondPort>/`, a second origin served by the same handler.
  public var secondBaseURL: URL {
    URL(string: "http://127.0.0.2:\(secondPort)/")!
  }

  /// Returns a snapshot of every request received so far, in arrival order.
  public var requests: [RecordedRequest] {
    state.requests
  }

  /// Forgets the requests recorded so far (for long benchmark runs); counts are kept.
  public func removeAllRequests() {
    state.removeAllRequests()
  }

  /// Returns the most requests that waited for their answers at the same time so far.
  ///
  /// A request waits from when it has been read until the handler has returned and, for
  /// ``ServerAction/slowHeaders(_:delay:)``, the delay is over: until the first byte of the
  /// answer is written (or the connection is dropped). Tests of client-side concurrency limits
  /// read it.
  public var maximumConcurrentRequests: Int {
    state.maximumConcurrentRequests
  }

  /// Returns the number of TCP connections accepted so far on both listeners.
  public var connectionCount: Int {
    state.connectionCount
  }

  /// Returns the number of connections open right now (accepted and not yet closed).
  public var openConnectionCount: Int {
    state.openConnectionCount
  }

  /// Waits until at least `count` requests have arrived; returns them, or `nil` on timeout or stop.
  public func waitForRequests(count: Int, timeout: Duration = .seconds(5)) -> [RecordedRequest]? {
    let deadline = Date(timeIntervalSinceNow: timeout.timeInterval)
    guard state.waitForRequests(count: count, until: deadline) else {
      return nil
    }
    return state.requests
  }

  /// Stops the server: closes both listeners and every open connection and returns promptly.
  ///
  /// Shuts every socket down, which wakes blocked reads and writes, and cuts short the waits of
  /// ``ServerAction/slowHeaders(_:delay:)``, ``ServerAction/trickle(_:chunkSize:interval:)`` and
  /// ``TransferFault/drip(chunkSize:interval:)``.
  /// Then waits (at most one second, in case a handler itself blocks) for the server's
  /// threads to finish. Safe to call more than once and from any thread, a handler included.
  public func stop() {
    state.stop()
  }

  private static func acceptLoop(
    listener: Int32, host: String, port: Int, state: ServerState,
    handler: @escaping @Sendable (RecordedRequest) -> ServerAction,
    bodyHandling: @escaping @Sendable (RecordedRequest) -> RequestBodyHandling
  ) {
    while let fd = Socket.accept(listener) {
      guard let number = state.adoptConnection(fd) else {
        Socket.close(fd)
        break
      }
      Socket.setNoDelay(fd)
      let connection = Connection(
        fd: fd, host: host, port: port, number: number, state: state, handler: handler,
        bodyHandling: bodyHandling)
      state.spawn(name: "LoopbackHTTPServer connection \(number)") { connection.run() }
    }
    state.release(listener, isConnection: false)
  }
}
