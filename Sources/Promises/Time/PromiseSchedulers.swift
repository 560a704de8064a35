import Dispatch
import Foundation

/// Holds the scheduler that time-based combinators use when no `scheduler:` is passed.
public enum PromiseSchedulers {
  private static let storage = LockedBox<any PromiseScheduler>(DispatchTimeScheduler())

  /// Gets or sets the scheduler used when no `scheduler:` is given; `DispatchTimeScheduler()` at first.
  ///
  /// Thread-safe to read and set. It is read when a combinator is called, so a change applies to
  /// combinators called afterwards; timers already scheduled keep their scheduler. Setting it
  /// affects every caller in the process (including libraries): in tests, prefer passing
  /// `scheduler:` explicitly over replacing the default.
  public static var `default`: any PromiseScheduler {
    get { storage.load() }
    // The value replaced is released after unlocking: its deinit may be user code.
    set { _ = storage.exchange(newValue) }
  }
}
