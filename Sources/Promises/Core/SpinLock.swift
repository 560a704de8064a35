import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A tiny spin lock on an atomic byte, stored inline in each promise (no allocation).
///
/// ThreadSanitizer sees its acquire/release atomics, unlike the futex hand-off of a
/// contended `Synchronization.Mutex` on Linux. Critical sections never run user code and
/// are a few loads and stores long; a waiter yields the CPU after a short spin.
@usableFromInline
struct SpinLock: ~Copyable, Sendable {
  @usableFromInline let word = Atomic<UInt8>(0)

  @usableFromInline
  init() {}

  @inlinable
  func lock() {
    if word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged { return }
    lockSlow()
  }

  @usableFromInline @inline(never)
  func lockSlow() {
    var spins = 0
    while true {
      if word.load(ordering: .relaxed) == 0,
        word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged
      {
        return
      }
      spins += 1
      if spins > 64 {
        sched_yield()
        spins = 0
      }
    }
  }

  @inlinable
  func unlock() {
    word.store(0, ordering: .releasing)
  }
}
