import Foundation
import Promises

/// The socket transport's kept-alive connections of one client: idle connections per origin,
/// bounded in number and in idle time, taken by the next request to the same origin.
///
/// A connection comes back only after a response read to its framed end with nothing after it
/// (`SocketTask` decides); one that has become readable while idle — the server closed it, or
/// sent bytes nobody asked for — is closed when it would be taken, never read as the next
/// answer. Idle connections are closed after `idleTimeout`, or sooner when the server said how
/// long it keeps them (`Keep-Alive: timeout=N`), and all of them when the client goes.
final class SocketConnectionPool: Sendable {
  /// An origin: a connection serves only requests to the one it was opened to.
  struct Key: Hashable, Sendable {
    var scheme: String
    var host: String
    var port: Int
  }

  private struct Idle: Sendable {
    let connection: SocketConnection
    /// The connection's wire state, idle: it carries on with the next exchange.
    let machine: HTTP1ConnectionStateMachine
    /// When it must be closed, in `DispatchTime` nanoseconds.
    let expiry: UInt64
  }

  private struct State: Sendable {
    var idle: [Key: [Idle]] = [:]
    /// Whether a sweep is scheduled.
    var sweeping = false
    /// Whether the client has gone: connections handed back are closed.
    var closed = false
    /// Connections opened and reused, for tests and the benchmarks.
    var opened = 0
    var reused = 0
  }

  private let state = LockedBox(State())
  /// The most idle connections kept per origin.
  let maximumIdlePerHost: Int
  /// How long an idle connection is kept.
  let idleTimeout: TimeInterval

  /// How long a connection is kept idle when nothing else says: shorter than the idle timeouts
  /// of common servers (nginx 75 s, Apache 5 s is shorter and says so in `Keep-Alive`).
  static let defaultIdleTimeout: TimeInterval = 30

  init(maximumIdlePerHost: Int, idleTimeout: TimeInterval = SocketConnectionPool.defaultIdleTimeout) {
    self.maximumIdlePerHost = max(0, maximumIdlePerHost)
    self.idleTimeout = idleTimeout
  }

  deinit {
    closeAll()
  }

  /// The number of connections opened and of times one was reused, since the pool was made.
  var counts: (opened: Int, reused: Int) { state.withLock { ($0.opened, $0.reused) } }

  /// Notes that a new connection was opened (for `counts`).
  func noteOpened() {
    state.withLock { $0.opened += 1 }
  }

  /// Takes the most recently used idle connection to `key` that is still good, with its
  /// machine, or `nil`.
  ///
  /// Expired connections and those the server closed or wrote to while idle are closed.
  func take(_ key: Key) -> (connection: SocketConnection, machine: HTTP1ConnectionStateMachine)? {
    while true {
      let now = DispatchTime.now().uptimeNanoseconds
      let (candidate, expired) = state.withLock { state -> (Idle?, [SocketConnection]) in
        guard var list = state.idle[key] else { return (nil, []) }
        var expired: [SocketConnection] = []
        list.removeAll { idle in
          guard idle.expiry <= now else { return false }
          expired.append(idle.connection)
          return true
        }
        let candidate = list.popLast()
        state.idle[key] = list.isEmpty ? nil : list
        return (candidate, expired)
      }
      for connection in expired { connection.close() }
      guard let candidate else { return nil }
      if candidate.connection.isQuietWhileIdle {
        state.withLock { $0.reused += 1 }
        return (candidate.connection, candidate.machine)
      }
      candidate.connection.close()
    }
  }

  /// Keeps `connection`, with its idle `machine`, for the next request to `key`, for at most
  /// `keepFor` seconds (the pool's idle timeout when `nil` or longer); closes it instead when
  /// the pool is full, closed, or `keepFor` leaves no time.
  func put(
    _ connection: SocketConnection, machine: HTTP1ConnectionStateMachine = HTTP1ConnectionStateMachine(),
    for key: Key, keepFor: TimeInterval? = nil
  ) {
    let seconds = min(keepFor ?? idleTimeout, idleTimeout)
    guard seconds > 0, maximumIdlePerHost > 0, !connection.isStopped else {
      connection.close()
      return
    }
    let expiry = DispatchTime.now().uptimeNanoseconds &+ UInt64(seconds * 1e9)
    let (evicted, scheduleSweep) = state.withLock { state -> (SocketConnection?, Bool) in
      guard !state.closed else { return (connection, false) }
      var list = state.idle[key] ?? []
      list.append(Idle(connection: connection, machine: machine, expiry: expiry))
      // The oldest goes when the origin has its fill.
      let evicted = list.count > maximumIdlePerHost ? list.removeFirst().connection : nil
      state.idle[key] = list
      let schedule = !state.sweeping
      state.sweeping = true
      return (evicted, schedule)
    }
    evicted?.close()
    if scheduleSweep { self.scheduleSweep(after: seconds) }
  }

  /// Closes every idle connection, and those handed back later.
  func closeAll() {
    let all = state.withLock { state -> [SocketConnection] in
      state.closed = true
      defer { state.idle = [:] }
      return state.idle.values.flatMap { $0.map(\.connection) }
    }
    for connection in all { connection.close() }
  }

  /// The number of idle connections kept.
  var idleCount: Int { state.withLock { $0.idle.values.reduce(0) { $0 + $1.count } } }

  /// Closes expired connections after `seconds`, and again while any are left.
  private func scheduleSweep(after seconds: TimeInterval) {
    DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + seconds + 0.05) { [weak self] in
      self?.sweep()
    }
  }

  private func sweep() {
    let now = DispatchTime.now().uptimeNanoseconds
    let (expired, next) = state.withLock { state -> ([SocketConnection], UInt64?) in
      var expired: [SocketConnection] = []
      var next: UInt64?
      for (key, list) in state.idle {
        let kept = list.filter { idle in
          if idle.expiry <= now {
            expired.append(idle.connection)
            return false
          }
          next = min(next ?? idle.expiry, idle.expiry)
          return true
        }
        state.idle[key] = kept.isEmpty ? nil : kept
      }
      state.sweeping = next != nil
      return (expired, next)
    }
    for connection in expired { connection.close() }
    if let next { scheduleSweep(after: Double(next - now) / 1e9) }
  }
}
