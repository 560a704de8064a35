import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A loopback port that nothing listens on, reserved for as long as this object lives.
///
/// For "connection refused" tests that run in parallel with servers: the port of a stopped
/// server can be handed to the next server that starts, but this port is bound (without
/// listening), so the kernel gives it to no one else and every connection to it is refused.
public final class ClosedPort: Sendable {
  /// The reserved port on 127.0.0.1.
  public let port: Int
  private let descriptor: Int32

  /// Reserves an ephemeral port on 127.0.0.1 without listening on it.
  ///
  /// - Throws: `LoopbackServerError` when the socket cannot be created or bound.
  public init() throws {
    let (fd, port) = try Socket.listen(on: "127.0.0.1", listening: false)
    self.descriptor = fd
    self.port = port
  }

  /// `http://127.0.0.1:<port>/`.
  public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)/")! }

  deinit {
    Socket.close(descriptor)
  }
}
