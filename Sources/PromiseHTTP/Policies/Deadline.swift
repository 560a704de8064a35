import Dispatch

/// A point in time by which a request, or a whole chain of requests, must have finished.
///
/// Make one with `Deadline.after(.seconds(5))` and pass the same value to every request of a
/// chain: each request then gets what is left of it, and the one running when it passes is
/// cancelled and rejected with `HTTPError.timedOut`. The client enforces deadlines with its own
/// timer, to the millisecond (libcurl's own timeouts have whole-second granularity), and a
/// request always ends at the earlier of its deadline and the client's `timeout`. The `timeout`
/// counts from when the request is sent; a deadline is a point in time, so it also runs while
/// the request waits for a connection (see `HTTPClient.maximumConcurrentRequestsPerHost`).
/// Deadlines use the monotonic clock: changing the wall clock does not move them.
public struct Deadline: Sendable, Comparable, CustomStringConvertible {
  /// The instant on the monotonic clock (`DispatchTime`).
  public let instant: DispatchTime
  /// The time that was allowed when the deadline was made, reported by `HTTPError.timedOut`.
  public let allowed: Duration

  /// Creates a deadline at `instant`, reporting `allowed` as the time that was given.
  public init(instant: DispatchTime, allowed: Duration) {
    self.instant = instant
    self.allowed = allowed
  }

  /// Returns a deadline `duration` from now.
  public static func after(_ duration: Duration) -> Deadline {
    Deadline(instant: duration.dispatchDeadline, allowed: duration)
  }

  /// A deadline that never passes.
  public static let distantFuture = Deadline(instant: .distantFuture, allowed: .seconds(Int64.max / 2))

  /// The time left before the deadline passes; zero once it has passed.
  public var remaining: Duration {
    let now = DispatchTime.now().uptimeNanoseconds
    let end = instant.uptimeNanoseconds
    return end > now ? .nanoseconds(Int64(clamping: end - now)) : .zero
  }

  /// Whether the deadline has passed.
  public var hasPassed: Bool { DispatchTime.now() >= instant }

  /// Orders deadlines by instant: the earlier one is smaller.
  public static func < (lhs: Deadline, rhs: Deadline) -> Bool {
    lhs.instant < rhs.instant
  }

  /// Deadlines are equal when their instants are.
  public static func == (lhs: Deadline, rhs: Deadline) -> Bool {
    lhs.instant == rhs.instant
  }

  /// For example `deadline(5.0 seconds allowed, 1.2 seconds left)`.
  public var description: String {
    "deadline(\(allowed) allowed, \(remaining) left)"
  }
}
