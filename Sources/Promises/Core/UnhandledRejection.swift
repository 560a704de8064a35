import Foundation

/// A rejection that nothing observed: reported to `UnhandledRejection.handler`.
///
/// A promise's rejection is observed when a callback is chained on it, when its `result`,
/// `value` or `wait` is read, or when it is the promise returned by `catch`. A rejected
/// promise that is released without any of these is reported once, from the thread that
/// released it. Cancellations (`CancellationError`) are never reported.
public struct UnhandledRejection: Sendable, CustomStringConvertible {
  /// The error the promise was rejected with.
  public let error: any Error
  /// Where the rejected promise was created.
  public let site: CreationSite

  /// `unhandled rejection of the promise created at …: error`.
  public var description: String {
    "unhandled rejection of the promise created at \(site): \(error)"
  }

  private static let storage = LockedBox(defaultHandler)

  /// The handler in place until you set one: `logToStandardError` in debug builds of this
  /// package, `nil` (silent) in release builds.
  public static var defaultHandler: (@Sendable (UnhandledRejection) -> Void)? {
    #if DEBUG
      return logToStandardError
    #else
      return nil
    #endif
  }

  /// Writes the report to standard error as one line: `Promises: unhandled rejection of the
  /// promise created at FILE:LINE: ERROR (…)`.
  ///
  /// The default handler in debug builds; set it as `handler` to keep the log in release
  /// builds too.
  public static let logToStandardError: @Sendable (UnhandledRejection) -> Void = { report in
    let line =
      "Promises: \(report) (chain a catch or recover on it, or set UnhandledRejection.handler)\n"
    FileHandle.standardError.write(Data(line.utf8))
  }

  /// The function called for each unhandled rejection; `nil` ignores them.
  ///
  /// By default (`defaultHandler`) debug builds log each report to standard error with the
  /// creation site's file and line, and release builds are silent. Thread-safe to read and set
  /// at any time. It is called on whichever thread releases the rejected promise, so keep it
  /// short and thread-safe (log, count, or assert in tests).
  public static var handler: (@Sendable (UnhandledRejection) -> Void)? {
    get { storage.load() }
    // The value replaced is released after unlocking: its deinit may be user code.
    set { _ = storage.exchange(newValue) }
  }

  static func report(_ error: any Error, site: CreationSite) {
    guard let handler = storage.withLock({ $0 }) else { return }
    handler(UnhandledRejection(error: error, site: site))
  }
}
