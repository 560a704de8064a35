import Foundation
import Promises

/// The origin a request is queued under: scheme, host and port, as `URLSession` pools connections.
struct RequestQueueKey: Hashable, Sendable, CustomStringConvertible {
  let scheme: String
  let host: String
  let port: Int

  /// The key of `url`: scheme and host lowercased, the port made explicit (80 for `http`, 443 for `https`).
  init(_ url: URL) {
    let scheme = url.scheme?.lowercased() ?? ""
    self.scheme = scheme
    self.host = url.host?.lowercased() ?? ""
    self.port = url.port ?? (scheme == "https" ? 443 : 80)
  }

  /// For example `127.0.0.1:8080`, as errors show it.
  var description: String { "\(host):\(port)" }
}

/// The place of a waiting job in a `RequestQueueState`; removes it with `remove(_:)`.
struct RequestQueueTicket: Hashable, Sendable {
  let key: RequestQueueKey
  let id: UInt64
}

/// The bookkeeping of a per-host request limit, as a value: no lock, no threads, no clock.
///
/// For each origin it counts the jobs running and keeps the waiting ones in arrival order.
/// Each event returns what its caller must do (start a job now, or not); the caller does it
/// after releasing whatever protects the state. Every operation is O(1), amortised:
/// - a waiting job is stored in a dictionary by ticket, its ticket in a FIFO of tickets;
/// - `remove(_:)` deletes the job from the dictionary only, leaving its ticket in the FIFO;
/// - `release(_:)` pops tickets until one still has a job, dropping the stale ones.
struct RequestQueueState<Job: Sendable>: Sendable {
  /// A FIFO on an array and a head index; the consumed prefix is dropped once it is half the array.
  private struct FIFO: Sendable {
    private var items: [UInt64] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }

    mutating func append(_ item: UInt64) {
      items.append(item)
    }

    mutating func popFirst() -> UInt64? {
      guard head < items.count else { return nil }
      let item = items[head]
      head += 1
      if head == items.count {
        items.removeAll(keepingCapacity: true)
        head = 0
      } else if head >= 32, head * 2 >= items.count {
        items.removeFirst(head)
        head = 0
      }
      return item
    }
  }

  private struct Host: Sendable {
    var running = 0
    var waiting = FIFO()
    var jobs: [UInt64: Job] = [:]
  }

  /// The most jobs that run at once for one origin; at least 1.
  let limit: Int
  private var hosts: [RequestQueueKey: Host] = [:]
  private var nextID: UInt64 = 0

  /// Creates the state of a queue that runs at most `limit` jobs at once per origin.
  init(limit: Int) {
    self.limit = max(1, limit)
  }

  /// Admits `job` for `key`: returns `nil` if it may start now (it then counts as running and
  /// is not stored), or the ticket under which it waits.
  mutating func enqueue(_ job: Job, for key: RequestQueueKey) -> RequestQueueTicket? {
    var host = hosts[key, default: Host()]
    defer { hosts[key] = host }
    if host.running < limit {
      host.running += 1
      return nil
    }
    nextID += 1
    host.waiting.append(nextID)
    host.jobs[nextID] = job
    return RequestQueueTicket(key: key, id: nextID)
  }

  /// Takes a waiting job out of the queue: returns it, or `nil` if it has already been started
  /// (by `release(_:)`) or removed.
  mutating func remove(_ ticket: RequestQueueTicket) -> Job? {
    guard var host = hosts[ticket.key], let job = host.jobs.removeValue(forKey: ticket.id) else {
      return nil
    }
    if host.running == 0, host.jobs.isEmpty {
      hosts[ticket.key] = nil
    } else {
      hosts[ticket.key] = host
    }
    return job
  }

  /// Ends a running job of `key`: returns the next waiting job, which now counts as running, or
  /// `nil` if none waits.
  mutating func release(_ key: RequestQueueKey) -> Job? {
    guard var host = hosts[key] else {
      assertionFailure("released a slot of \(key) that was not taken")
      return nil
    }
    host.running -= 1
    var next: Job?
    while next == nil, let id = host.waiting.popFirst() {
      next = host.jobs.removeValue(forKey: id)
    }
    if next != nil { host.running += 1 }
    if host.running == 0, host.jobs.isEmpty {
      hosts[key] = nil
    } else {
      hosts[key] = host
    }
    return next
  }

  /// The jobs of `key` running now.
  func runningCount(for key: RequestQueueKey) -> Int {
    hosts[key]?.running ?? 0
  }

  /// The jobs of `key` waiting now.
  func waitingCount(for key: RequestQueueKey) -> Int {
    hosts[key]?.jobs.count ?? 0
  }

  /// The origins with a job running or waiting: zero when the queue is idle (nothing leaks).
  var originCount: Int { hosts.count }
}

/// The per-host limit of a client's requests in flight: a FIFO of requests waiting for a slot.
///
/// `URLSession` opens at most `httpMaximumConnectionsPerHost` connections to one origin and
/// keeps further tasks waiting inside libcurl, where their deadlines would run out before they
/// are sent. The client keeps them here instead, and starts their deadlines when they leave.
/// Jobs run outside the lock, on the thread that admitted or released them.
final class RequestQueue: Sendable {
  /// No job runs under the lock, and a job taken out is released after unlocking.
  private let state: LockedBox<RequestQueueState<@Sendable () -> Void>>

  /// The most requests in flight at once per origin.
  let limit: Int

  /// Creates a queue that lets at most `limit` requests (at least 1) run at once per origin.
  init(limit: Int) {
    let state = RequestQueueState<@Sendable () -> Void>(limit: limit)
    self.limit = state.limit
    self.state = LockedBox(state)
  }

  /// Runs `start` now if `key` has a free slot, else queues it until `release(_:)` frees one.
  ///
  /// - Returns: `nil` if `start` ran, or the ticket of the waiting job. A started job holds its
  ///   slot until `release(_:)`.
  func enqueue(_ key: RequestQueueKey, start: @escaping @Sendable () -> Void) -> RequestQueueTicket? {
    let ticket = state.withLock { $0.enqueue(start, for: key) }
    if ticket == nil { start() }
    return ticket
  }

  /// Takes a waiting request out of the queue; returns `false` if it has been started already.
  func remove(_ ticket: RequestQueueTicket) -> Bool {
    let job = state.withLock { $0.remove(ticket) }
    return job != nil
  }

  /// Frees the slot of a finished request and starts the next one waiting for `key`, if any.
  func release(_ key: RequestQueueKey) {
    let next = state.withLock { $0.release(key) }
    next?()
  }

  /// The requests of `key` in flight and waiting, for tests.
  func counts(for key: RequestQueueKey) -> (running: Int, waiting: Int) {
    state.withLock { ($0.runningCount(for: key), $0.waitingCount(for: key)) }
  }
}
