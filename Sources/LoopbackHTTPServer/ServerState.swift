import Foundation

/// The mutable state shared by a server's accept and connection threads.
///
/// Every stored `var` is read or written only while `condition` (a pthread mutex plus
/// condition variable) is held, which makes the `@unchecked Sendable` sound. Sockets are
/// shut down by ``stop()`` under the lock but closed only by their owning thread after it
/// unregisters them under the same lock, so a descriptor number is never reused while `stop`
/// might still touch it.
final class ServerState: @unchecked Sendable {
  private let condition = NSCondition()
  private var stopped = false
  private var openSockets: Set<Int32> = []
  private var openConnections = 0
  private var recorded: [RecordedRequest] = []
  private var unanswered = 0
  private var mostUnanswered = 0
  private var accepted = 0
  private var runningThreads = 0
  private var serverThreads: Set<ObjectIdentifier> = []
  private var serial = 0

  /// How long ``stop()`` waits for the threads to finish (a handler stuck in user code can make
  /// it wait this long).
  static let stopTimeout: TimeInterval = 1.0

  var isStopped: Bool {
    condition.lock()
    defer { condition.unlock() }
    return stopped
  }

  var requests: [RecordedRequest] {
    condition.lock()
    defer { condition.unlock() }
    return recorded
  }

  var connectionCount: Int {
    condition.lock()
    defer { condition.unlock() }
    return accepted
  }

  var maximumConcurrentRequests: Int {
    condition.lock()
    defer { condition.unlock() }
    return mostUnanswered
  }

  var openConnectionCount: Int {
    condition.lock()
    defer { condition.unlock() }
    return openConnections
  }

  /// Registers a listening socket; returns `false` (and the caller closes it) after stop.
  func adoptListener(_ fd: Int32) -> Bool {
    condition.lock()
    defer { condition.unlock() }
    guard !stopped else { return false }
    openSockets.insert(fd)
    return true
  }

  /// Registers an accepted connection and returns its 1-based number, or `nil` after stop.
  func adoptConnection(_ fd: Int32) -> Int? {
    condition.lock()
    defer { condition.unlock() }
    guard !stopped else { return nil }
    openSockets.insert(fd)
    openConnections += 1
    accepted += 1
    return accepted
  }

  /// Unregisters a socket and closes it; `reset` makes the close send RST.
  func release(_ fd: Int32, isConnection: Bool, reset: Bool = false) {
    condition.lock()
    openSockets.remove(fd)
    if isConnection { openConnections -= 1 }
    condition.broadcast()
    condition.unlock()
    if reset { Socket.setLingerZero(fd) }
    Socket.close(fd)
  }

  /// Notes that a recorded request is about to be answered (or dropped): no longer unanswered.
  func answering() {
    condition.lock()
    unanswered -= 1
    condition.unlock()
  }

  /// Returns 1, 2, 3, … on successive calls (for tags that change on every request).
  func nextSerial() -> Int {
    condition.lock()
    defer { condition.unlock() }
    serial += 1
    return serial
  }

  /// Empties the request log.
  func removeAllRequests() {
    condition.lock()
    recorded.removeAll()
    condition.unlock()
  }

  /// Appends a request to the log and wakes anyone waiting for it; it counts as unanswered
  /// until ``answering()``.
  func record(_ request: RecordedRequest) {
    condition.lock()
    recorded.append(request)
    unanswered += 1
    mostUnanswered = max(mostUnanswered, unanswered)
    condition.broadcast()
    condition.unlock()
  }

  /// Waits until at least `count` requests are recorded; returns `false` on timeout or stop.
  func waitForRequests(count: Int, until deadline: Date) -> Bool {
    condition.lock()
    defer { condition.unlock() }
    while recorded.count < count {
      if stopped || !condition.wait(until: deadline) { return recorded.count >= count }
    }
    return true
  }

  /// Sleeps for `duration`; returns `false` early (at once if already stopped) when the server stops.
  func sleep(for duration: Duration) -> Bool {
    let deadline = Date(timeIntervalSinceNow: max(0, duration.timeInterval))
    condition.lock()
    defer { condition.unlock() }
    while !stopped {
      if !condition.wait(until: deadline) { break }
      if Date() >= deadline { break }
    }
    return !stopped
  }

  /// Starts a thread that runs `body`; ``stop()`` waits for it.
  func spawn(name: String, _ body: @escaping @Sendable () -> Void) {
    condition.lock()
    runningThreads += 1
    condition.unlock()
    let thread = Thread { [self] in
      let me = ObjectIdentifier(Thread.current)
      condition.lock()
      serverThreads.insert(me)
      condition.unlock()
      body()
      condition.lock()
      serverThreads.remove(me)
      runningThreads -= 1
      condition.broadcast()
      condition.unlock()
    }
    thread.name = name
    thread.start()
  }

  /// Stops accepting, wakes every blocked thread and waits up to ``stopTimeout`` for them.
  func stop() {
    condition.lock()
    defer { condition.unlock() }
    stopped = true
    for fd in openSockets {
      Socket.shutdownBoth(fd)
    }
    condition.broadcast()
    // A handler may call stop() itself: then its own thread cannot finish before we return.
    let own = serverThreads.contains(ObjectIdentifier(Thread.current)) ? 1 : 0
    let deadline = Date(timeIntervalSinceNow: Self.stopTimeout)
    while runningThreads > own {
      if !condition.wait(until: deadline) { break }
    }
  }
}

extension Duration {
  /// This duration in seconds, for Foundation deadlines.
  var timeInterval: TimeInterval {
    Double(components.seconds) + Double(components.attoseconds) / 1e18
  }
}
