import Foundation

/// Collects what an example prints, so that its hidden assertions can check the `// prints`
/// comments a reader sees.
///
/// A snippet shadows the standard `print` with a local constant, `let print = output.print`
/// (hidden), so the visible code calls `print(value)` as real code would, while each test keeps
/// its own output even when tests and callbacks run concurrently.
final class DocOutput: @unchecked Sendable {
  // Safety: `recorded` and `waiters` are only accessed while `lock` is held.
  private let lock = NSLock()
  private var recorded: [String] = []
  private var waiters: [(id: Int, count: Int, continuation: CheckedContinuation<[String], Never>)] = []
  private var nextID = 0

  /// Records `String(describing: item)` as one line; use in place of the standard `print`.
  var print: @Sendable (Any) -> Void {
    { [self] item in record("\(item)") }
  }

  /// The lines printed so far.
  var lines: [String] {
    lock.lock()
    defer { lock.unlock() }
    return recorded
  }

  /// Records one line and wakes the waiters it satisfies.
  func record(_ line: String) {
    lock.lock()
    recorded.append(line)
    let ready = waiters.filter { $0.count <= recorded.count }
    waiters.removeAll { $0.count <= recorded.count }
    let snapshot = recorded
    lock.unlock()
    for waiter in ready { waiter.continuation.resume(returning: snapshot) }
  }

  /// Returns the lines printed once there are at least `count`, or after `seconds` with what
  /// there is (the assertion that follows then fails instead of hanging).
  func lines(count: Int, within seconds: Double = 20) async -> [String] {
    await withCheckedContinuation { continuation in
      lock.lock()
      if recorded.count >= count {
        let snapshot = recorded
        lock.unlock()
        continuation.resume(returning: snapshot)
        return
      }
      nextID += 1
      let id = nextID
      waiters.append((id, count, continuation))
      lock.unlock()
      DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
        giveUp(id)
      }
    }
  }

  private func giveUp(_ id: Int) {
    lock.lock()
    let expired = waiters.filter { $0.id == id }
    waiters.removeAll { $0.id == id }
    let snapshot = recorded
    lock.unlock()
    for waiter in expired { waiter.continuation.resume(returning: snapshot) }
  }
}
