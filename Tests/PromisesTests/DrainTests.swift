import Dispatch
import Testing

@testable import Promises

/// The drain's outbox cache lets go of queues only after the settling promise has unlocked
/// (Docs/Design.md, invariant I6): the look-up that replaces the cached queue runs under the
/// promise's lock, and the cached reference may be a queue's last. (The queues of exited threads
/// take the same path, through `displaced`; a test of them would race with every other thread
/// that empties the shared graveyard.)
@Suite("Drain: queues displaced from the outbox cache")
struct DrainTests {
  @Test func aQueueReplacedInTheCacheUnderALockIsReleasedOnlyAfterUnlocking() {
    Drain.current._withUnsafeGuaranteedRef { drain in
      drain.finishPlacing()  // nothing pending from earlier work on this thread
      weak var first: DispatchQueue?
      do {
        let queue = DispatchQueue(label: "DrainTests.first")
        first = queue
        _ = drain.outbox(of: queue)  // cached: the drain now holds the only other reference
      }
      #expect(first != nil, "the cache keeps the queue it looked up")
      let second = DispatchQueue(label: "DrainTests.second")
      _ = drain.outbox(of: second)  // what `place` does under a promise's lock
      #expect(first != nil, "the replaced queue was released during the look-up, under the lock")
      drain.finishPlacing()  // what a settling promise calls after unlocking
      #expect(first == nil, "the replaced queue is released after unlocking")
    }
  }
}
