import Foundation
import Promises

/// How far an upload or a download has come: the bytes so far and the total expected.
///
/// Delivered to a `TransferProgressHandler`: the first update at once, then at most one per
/// `interval`, and a last one (`isFinal`) whose `completedBytes` equals the bytes written to
/// disk or sent.
public struct TransferProgress: Sendable, Hashable, CustomStringConvertible {
  /// The bytes received (written to the destination) or sent so far.
  ///
  /// It can go down: a download that restarts from the first byte (a server that ignores
  /// `Range`, say) starts counting again.
  public var completedBytes: Int64
  /// The total the transfer expects, or `nil` when it is not known (a body without
  /// `Content-Length`, a stream of chunks of unknown length).
  public var expectedBytes: Int64?
  /// Whether this is the transfer's last update: the transfer is complete.
  public var isFinal: Bool

  /// Creates a progress value.
  public init(completedBytes: Int64, expectedBytes: Int64?, isFinal: Bool = false) {
    self.completedBytes = completedBytes
    self.expectedBytes = expectedBytes
    self.isFinal = isFinal
  }

  /// The fraction completed, from 0 to 1, or `nil` when the total is not known.
  public var fractionCompleted: Double? {
    guard let expectedBytes else { return nil }
    guard expectedBytes > 0 else { return isFinal ? 1 : 0 }
    return min(1, Double(completedBytes) / Double(expectedBytes))
  }

  /// `"1048576 of 4194304 bytes"`, or `"1048576 bytes"` when the total is not known.
  public var description: String {
    let total = expectedBytes.map { " of \($0)" } ?? ""
    return "\(completedBytes)\(total) bytes\(isFinal ? " (final)" : "")"
  }
}

/// Where and how often a transfer reports its `TransferProgress`.
///
/// Updates are coalesced: the first is delivered at once, later ones at most once per
/// `interval` (the latest value wins), and the last one (`isFinal`) always. A transfer that
/// fails or is cancelled delivers no final update.
///
/// ```swift
/// let progress = TransferProgressHandler(on: .main) { print($0) }
/// ```
///
/// or, to read the updates as an `AsyncStream`:
///
/// ```swift
/// let (progress, updates) = TransferProgressHandler.makeStream()
/// ```
public struct TransferProgressHandler: Sendable {
  /// The default `interval`: 100 ms, ten updates per second at most.
  public static let defaultInterval: Duration = .milliseconds(100)

  enum Target: Sendable {
    case closure(DispatchQueue?, @Sendable (TransferProgress) -> Void)
    case stream(AsyncStream<TransferProgress>.Continuation)
  }

  let target: Target
  /// The shortest time between two updates (but the last).
  public let interval: Duration

  /// Creates a handler that calls `body` on `queue` (the client's `callbackQueue` when `nil`).
  ///
  /// - Parameters:
  ///   - queue: A serial queue for the updates; `nil` for the client's `callbackQueue`.
  ///   - interval: The shortest time between two updates; the last one is never held back.
  ///   - body: Called with each update, in order.
  public init(
    on queue: DispatchQueue? = nil, interval: Duration = Self.defaultInterval,
    _ body: @escaping @Sendable (TransferProgress) -> Void
  ) {
    self.target = .closure(queue, body)
    self.interval = interval
  }

  private init(continuation: AsyncStream<TransferProgress>.Continuation, interval: Duration) {
    self.target = .stream(continuation)
    self.interval = interval
  }

  /// Returns a handler and the stream of its updates; the stream ends after the final update,
  /// or when the transfer fails or is cancelled.
  ///
  /// The stream keeps only the newest update when its reader falls behind.
  public static func makeStream(
    interval: Duration = Self.defaultInterval
  ) -> (handler: TransferProgressHandler, updates: AsyncStream<TransferProgress>) {
    let (stream, continuation) = AsyncStream<TransferProgress>.makeStream(
      bufferingPolicy: .bufferingNewest(1))
    return (TransferProgressHandler(continuation: continuation, interval: interval), stream)
  }
}

/// Coalesces one transfer's updates for its `TransferProgressHandler`.
///
/// `update` is called for each chunk (on the session's delegate queue): the first update is
/// delivered at once, later ones when `interval` has passed since the last delivery, or by a
/// timer that delivers the latest value; `finish` delivers the final update and ends.
final class ProgressReporter: Sendable {
  private struct State {
    /// An update held back by the interval, delivered by the timer.
    var pending: TransferProgress?
    /// When the last update was delivered, in uptime nanoseconds; nil before the first.
    var lastDelivery: UInt64?
    var timerArmed = false
    var ended = false
  }

  private let handler: TransferProgressHandler
  private let queue: DispatchQueue
  private let intervalNanoseconds: UInt64
  private let state = LockedBox(State())
  /// Tests only: told, under the lock, the uptime of each update delivered before the final one.
  private let observeDelivery: (@Sendable (UInt64) -> Void)?

  /// A reporter for `handler`, delivering on `defaultQueue` when the handler names none.
  init(
    _ handler: TransferProgressHandler, defaultQueue: DispatchQueue,
    observeDelivery: (@Sendable (UInt64) -> Void)? = nil
  ) {
    self.handler = handler
    self.observeDelivery = observeDelivery
    if case .closure(let queue?, _) = handler.target {
      self.queue = queue
    } else {
      self.queue = defaultQueue
    }
    let interval = handler.interval.components
    let nanoseconds = interval.seconds.multipliedReportingOverflow(by: 1_000_000_000)
    self.intervalNanoseconds =
      interval.seconds < 0
      ? 0
      : nanoseconds.overflow
        ? UInt64.max : UInt64(nanoseconds.partialValue) + UInt64(max(0, interval.attoseconds / 1_000_000_000))
  }

  /// The transfer has reached `completed` of `expected` bytes.
  func update(completed: Int64, expected: Int64?) {
    let progress = TransferProgress(completedBytes: completed, expectedBytes: expected)
    state.withLock { state in
      guard !state.ended else { return }
      state.pending = progress
      deliverPending(&state)
    }
  }

  /// The transfer completed with `completed` bytes: delivers the final update, then nothing
  /// more, and calls `settle` once the update is delivered — after the handler's closure has
  /// returned, or once the update is in the stream — so that the transfer's promise is
  /// fulfilled after its final update, never before.
  func finish(completed: Int64, expected: Int64?, then settle: @escaping @Sendable () -> Void) {
    let ended = state.withLock { state -> Bool in
      guard !state.ended else { return true }
      state.ended = true
      let final = TransferProgress(completedBytes: completed, expectedBytes: expected, isFinal: true)
      switch handler.target {
      case .closure(_, let body):
        queue.async {
          body(final)
          settle()
        }
      case .stream(let continuation):
        continuation.yield(final)
        continuation.finish()
      }
      return false
    }
    if ended {
      settle()
    } else if case .stream = handler.target {
      settle()
    }
  }

  /// The transfer failed or was cancelled: nothing more is delivered (a stream ends).
  func abandon() {
    state.withLock { state in
      guard !state.ended else { return }
      state.ended = true
      end()
    }
  }

  private func flush() {
    state.withLock { state in
      state.timerArmed = false
      guard !state.ended else { return }
      deliverPending(&state)
    }
  }

  /// Delivers the pending update when an interval has passed since the last delivery, or else
  /// arms the timer (once) for when it will have; called under the lock, by an update and by
  /// the timer alike, so that no two deliveries are less than an interval apart.
  private func deliverPending(_ state: inout State) {
    guard let pending = state.pending else { return }
    // The clock is read under the lock, as `lastDelivery` was written, so it is never behind it
    // (monotonic): read before the lock, a flush could deliver in between and move
    // `lastDelivery` past the reading, and the update then went out at once as well.
    let now = DispatchTime.now().uptimeNanoseconds
    if let last = state.lastDelivery, now - min(now, last) < intervalNanoseconds {
      guard !state.timerArmed else { return }
      state.timerArmed = true
      let wait = intervalNanoseconds - (now - min(now, last))
      queue.asyncAfter(deadline: .now() + .nanoseconds(Int(min(wait, UInt64(Int.max))))) { [self] in
        flush()
      }
      return
    }
    state.lastDelivery = now
    state.pending = nil
    deliver(pending, at: now)
  }

  /// Hands `progress` to the target; called under the lock, so deliveries keep their order
  /// (the closure runs later, on the queue; no user code runs under the lock).
  private func deliver(_ progress: TransferProgress, at now: UInt64) {
    observeDelivery?(now)
    switch handler.target {
    case .closure(_, let body):
      queue.async { body(progress) }
    case .stream(let continuation):
      continuation.yield(progress)
    }
  }

  private func end() {
    if case .stream(let continuation) = handler.target { continuation.finish() }
  }
}
