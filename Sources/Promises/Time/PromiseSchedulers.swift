import Dispatch
import Foundation

/// Holds the scheduler that time-based combinators use when no `scheduler:` is passed.
public enum PromiseSchedulers {
  private static let storage = LockedScheduler(DispatchTimeScheduler())

  /// Gets or sets the scheduler used when no `scheduler:` is given; `DispatchTimeScheduler()` at first.
  ///
  /// Thread-safe to read and set. It is read when a combinator is called, so a change applies to
  /// combinators called afterwards; timers already scheduled keep their scheduler. Setting it
  /// affects every caller in the process (including libraries): in tests, prefer passing
  /// `scheduler:` explicitly over replacing the default.
  public static var `default`: any PromiseScheduler {
    get { storage.get() }
    set { storage.set(newValue) }
  }
}

/// A lock-protected scheduler reference.
private final class LockedScheduler: @unchecked Sendable {
  // Safety: `value` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var value: any PromiseScheduler

  init(_ value: any PromiseScheduler) {
    self.value = value
  }

  func get() -> any PromiseScheduler {
    lock.withLock { value }
  }

  func set(_ newValue: any PromiseScheduler) {
    lock.withLock { value = newValue }
  }
}
