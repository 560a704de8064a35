import Dispatch
import Testing

@testable import Promises

/// `LockedBox`, the locked state of every type outside the promise's own core.
@Suite("LockedBox", .timeLimit(.minutes(1)))
struct LockedBoxTests {
  @Test func manyThreadsIncrementingLoseNoIncrement() {
    let box = LockedBox(0)
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      for _ in 0..<10_000 {
        box.withLock { $0 += 1 }
      }
    }
    #expect(box.withLock { $0 } == 80_000)
  }

  @Test func withLockReturnsTheBodysResultAndRethrows() {
    struct Refused: Error {}
    let box = LockedBox([1, 2])
    #expect(box.withLock { $0.count } == 2)
    #expect(throws: Refused.self) {
      try box.withLock { _ in throw Refused() }
    }
    #expect(box.withLock { $0 } == [1, 2])
  }

  @Test func aValueMovedOutIsReleasedAfterUnlockingSoItsDeinitCanTakeTheLock() {
    let box = LockedBox(Held())
    weak var weakCanary: Canary?
    do {
      let canary = Canary(box)
      weakCanary = canary
      box.withLock { $0.canary = canary }
    }
    #expect(weakCanary != nil)
    do {
      let taken: Canary? = box.withLock { state in
        defer { state.canary = nil }
        return state.canary
      }
      // Out of the box but still held here: the lock is free, the canary alive.
      #expect(taken != nil)
      #expect(weakCanary != nil)
    }
    // Released after unlocking: its deinit took the lock without deadlocking.
    #expect(weakCanary == nil)
    #expect(box.withLock { $0.deinitsRun } == 1)
  }

  struct Held: Sendable {
    var canary: Canary?
    var deinitsRun = 0
  }

  /// Takes the box's lock in its `deinit`: released under the lock, it would deadlock.
  final class Canary: Sendable {
    let box: LockedBox<Held>

    init(_ box: LockedBox<Held>) { self.box = box }

    deinit {
      box.withLock { $0.deinitsRun += 1 }
    }
  }
}
