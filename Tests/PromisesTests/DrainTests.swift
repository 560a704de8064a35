import Dispatch
import Foundation
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

#if canImport(Glibc)
  import Glibc

  /// A thread's drain as the thread exits: the library's thread-specific-data destructor releases
  /// it and clears the thread-local word through which settlements find it.
  @Suite("Drain: threads that exit", .timeLimit(.minutes(1)))
  struct ExitingThreadDrainTests {
    /// What a destructor of the test's own key settles.
    final class Settlement: Sendable {
      let resolver: Promise<Int>.Resolver
      init(_ resolver: Promise<Int>.Resolver) { self.resolver = resolver }
    }

    /// A promise settled by a destructor that runs after the library's (a key made later has a
    /// higher index, and glibc runs destructors in index order): the settlement finds the word
    /// cleared, makes a new drain for the exiting thread, and the library's destructor, which
    /// glibc runs again for the new value, releases it. Were the word left pointing at the
    /// released drain, the settlement would use freed memory: without the clearing, this crashed
    /// in 2 runs of 3 (AddressSanitizer, in CI, catches it every time), so it runs in a child
    /// process.
    @Test(.tags(.childProcess))
    func aPromiseSettledByALaterDestructorOfTheExitingThreadRunsItsCallback() async {
      await #expect(processExitsWith: .success) {
        _ = Drain.current  // the library's key exists before the test's
        var key = pthread_key_t()
        let created = pthread_key_create(&key) { pointer in
          guard let pointer else { return }
          Unmanaged<Settlement>.fromOpaque(pointer).takeRetainedValue().resolver.fulfill(42)
        }
        guard created == 0 else { exit(2) }
        let (promise, resolver) = Promise<Int>.pending()
        let mapped = promise.map(on: .global()) { $0 + 1 }
        let testKey = key
        let thread = Thread {
          // The thread has a drain of its own, released as it exits.
          _ = Drain.current
          pthread_setspecific(testKey, Unmanaged.passRetained(Settlement(resolver)).toOpaque())
        }
        thread.start()
        exit((try? mapped.wait(timeout: 10)) == 43 ? 0 : 1)
      }
    }
  }
#endif
