#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A value that is read and written only while a lock is held: the one home of shared mutable
/// state outside the promise's own core.
///
/// Hold the state of a type as one struct in a `let` box, and reach it only through
/// `withLock`; a class whose stored properties are constants and boxes is then `Sendable`
/// without `@unchecked`. What `withLock` must not do is listed on it.
///
/// The box is `Sendable` when `State` is (as SwiftNIO's `NIOLockedValueBox`). A `sending`
/// initializer (as `Synchronization.Mutex`) would admit non-`Sendable` state, but every
/// `withLock` result would then have to be `sending` too, which region checking restricts at
/// each call site; every state in this package is `Sendable` already.
///
/// The lock is a `pthread_mutex_t` allocated inline with the state (SwiftNIO's `LockStorage`
/// pattern: one allocation for the box, where an `NSLock` is an object with a mutex allocated
/// apart), because ThreadSanitizer understands it; it does not see the contended hand-off of
/// `Synchronization.Mutex` on Linux and reports false races.
package struct LockedBox<State> {
  // Safety of `@unchecked Sendable` (argued here once, for every owner): the state lives in
  // `storage`'s header and is reached only through `withLock`, which holds the mutex for the
  // whole of `body`, so no two threads access it at once, and each unlock/lock pair orders one
  // holder's writes before the next holder's reads. The mutex is initialized before the box is
  // returned and destroyed in `deinit`, when no thread can hold the box. Values leave the box
  // only as `body`'s result, which a `Sendable` state makes safe to use on any thread.
  private let storage: Storage

  /// Creates a box holding `state`.
  package init(_ state: State) {
    storage = Storage.create(state)
  }

  /// Runs `body` with the state while holding the lock, and returns its result.
  ///
  /// `body` must be short and must not run code it does not know: no user closure, no
  /// `queue.async` of user work, no release of anything whose `deinit` may run user code or
  /// take this lock (move such values out as the result and let them go after `withLock`
  /// returns), and no `withLock` on the same box (the lock is not recursive: that deadlocks).
  @inline(__always)
  package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    try storage.withUnsafeMutablePointers { state, mutex in
      pthread_mutex_lock(mutex)
      defer { pthread_mutex_unlock(mutex) }
      return try body(&state.pointee)
    }
  }

  /// Returns a copy of the state, read under the lock.
  package func load() -> State {
    withLock { $0 }
  }

  /// Replaces the state with `newState` and returns the state it replaced, so that the caller
  /// releases it after unlocking (its `deinit` may be user code).
  @discardableResult
  package func exchange(_ newState: State) -> State {
    withLock { state in
      defer { state = newState }
      return state
    }
  }

  /// The state (header) and the mutex (the one element), in one allocation.
  private final class Storage: ManagedBuffer<State, pthread_mutex_t> {
    static func create(_ state: State) -> Storage {
      let buffer = unsafeDowncast(
        Storage.create(minimumCapacity: 1) { _ in state }, to: Storage.self)
      buffer.withUnsafeMutablePointerToElements { mutex in
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "LockedBox: pthread_mutex_init failed (\(status))")
      }
      return buffer
    }

    deinit {
      _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
    }
  }
}

extension LockedBox: @unchecked Sendable where State: Sendable {}
