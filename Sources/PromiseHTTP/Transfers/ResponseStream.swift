import Foundation
import Promises

/// One streamed body shared by the session (which appends), the request (which ends it) and
/// its single reader (which takes its bytes): a `ResponseStreamBuffer` under a lock, and the
/// reader's wait.
///
/// Every event changes the state under the lock; a reader to resume or a request to cancel is
/// taken out and run after unlocking.
final class ResponseStream: Sendable {
  fileprivate struct State: Sendable {
    var buffer: ResponseStreamBuffer
    /// The reader waiting for bytes (the buffer was empty).
    var waiter: CheckedContinuation<Data?, any Error>?
    /// Whether an iterator has claimed the body.
    var claimed = false
    /// Cancels the request; dropped once the stream ends (the request has ended, or is being
    /// cancelled).
    var cancelRequest: (@Sendable () -> Void)?
    /// Whether the stream was cancelled before `cancelRequest` was attached.
    var cancelledEarly = false
    /// Whether the writer waits for room (`room`), to be signalled once there is some.
    var writerWaits = false

    /// Takes the waiting writer's wake-up if the buffer has room for a chunk again, or has ended.
    mutating func takeWriter() -> Bool {
      guard writerWaits, buffer.end != nil || buffer.memoryBytes <= buffer.highWaterMark / 2 else {
        return false
      }
      writerWaits = false
      return true
    }
  }

  private let state: LockedBox<State>
  /// Where a writer that may wait (`append(_:waitingForRoom:)`) waits: signalled once per wait,
  /// by the reader that made room or by the end of the stream.
  private let room = DispatchSemaphore(value: 0)

  init(highWaterMark: Int, spillLimit: Int64) {
    state = LockedBox(
      State(buffer: ResponseStreamBuffer(highWaterMark: highWaterMark, spillLimit: spillLimit)))
  }

  deinit {
    state.withLock { $0.buffer.closeFile() }
  }

  /// Attaches what cancels the request; runs it at once if the stream was cancelled already.
  func attach(cancelRequest: @escaping @Sendable () -> Void) {
    let cancelNow = state.withLock { state -> Bool in
      guard state.buffer.end == nil else { return state.cancelledEarly }
      state.cancelRequest = cancelRequest
      return false
    }
    if cancelNow { cancelRequest() }
  }

  // MARK: The session's side

  /// Takes bytes of the body, on the session's delegate queue or the socket task's thread.
  ///
  /// With `waitingForRoom` (the socket transport's thread, which may block), waits first until
  /// the bytes fit under the high-water mark in memory or the stream ends: the connection is not
  /// read meanwhile, so TCP holds the server back and nothing goes to the spill file. The
  /// session's delegate queue must not wait: its bytes go to the spill file instead.
  func append(_ data: Data, waitingForRoom: Bool = false) {
    while waitingForRoom {
      let full = state.withLock { state -> Bool in
        guard !state.buffer.hasRoom(for: data.count) else { return false }
        state.writerWaits = true
        return true
      }
      guard full else { break }
      room.wait()
    }
    let (resume, cancel) = state.withLock { state in
      var cancel: (@Sendable () -> Void)?
      if state.buffer.append(data) != nil {
        // The buffer failed (its file is full or broken): the request stops too.
        cancel = state.cancelRequest
        state.cancelRequest = nil
      }
      return (state.takeWaiter(), cancel)
    }
    resume?()
    cancel?()
  }

  /// Ends the stream once the request has ended: the reader sees `end` after the bytes it has
  /// not read yet (unless it was cancelled first).
  func finish(_ end: ResponseStreamBuffer.End) {
    let (resume, wake) = state.withLock { state in
      state.buffer.finish(end)
      state.cancelRequest = nil
      return (state.takeWaiter(), state.takeWriter())
    }
    resume?()
    if wake { room.signal() }
  }

  // MARK: The reader's side

  /// Cancels the stream, unless it has ended.
  ///
  /// The request stops (the server sees the connection close), the bytes not read yet are
  /// dropped, and a waiting or later `next()` throws `CancellationError`.
  func cancel() {
    let (resume, cancel, wake) = state.withLock { state in
      let wasRunning = state.buffer.end == nil
      guard case .cancelled = state.buffer.finish(.cancelled) else {
        return (state.takeWaiter(), (@Sendable () -> Void)?.none, state.takeWriter())
      }
      if wasRunning, state.cancelRequest == nil { state.cancelledEarly = true }
      let cancel = state.cancelRequest
      state.cancelRequest = nil
      return (state.takeWaiter(), cancel, state.takeWriter())
    }
    resume?()
    if wake { room.signal() }
    cancel?()
  }

  /// Claims the body for one iterator; returns `false` if another has claimed it.
  func claim() -> Bool {
    state.withLock { state in
      defer { state.claimed = true }
      return !state.claimed
    }
  }

  /// Returns the next bytes, or `nil` at the end of the body; waits while none have arrived.
  ///
  /// Throws the request's error (a cut, a deadline), `CancellationError` once cancelled (the
  /// calling task's cancellation cancels the stream), or an `HTTPStreamError`.
  func next() async throws -> Data? {
    // Fast path: bytes are buffered, or the stream has ended.
    let (ready, wake) = state.withLock { state in (state.buffer.next(), state.takeWriter()) }
    if wake { room.signal() }
    if let result = try Self.outcome(of: ready) { return result }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data?, any Error>) in
        let (found, wake) = state.withLock { state -> (ResponseStreamBuffer.Next?, Bool) in
          // A copy of the iterator waiting already: the body has one reader at a time.
          guard state.waiter == nil else { return (nil, false) }
          let next = state.buffer.next()
          if case .wait = next { state.waiter = continuation }
          return (next, state.takeWriter())
        }
        if wake { room.signal() }
        guard let found else { return continuation.resume(throwing: HTTPStreamError.alreadyIterated) }
        if case .wait = found { return }
        continuation.resume(with: Result { try Self.outcome(of: found) ?? nil })
      }
    } onCancel: {
      cancel()
    }
  }

  /// `nil` for `wait`; else the bytes, `.some(nil)` at the end, or the error.
  private static func outcome(of next: ResponseStreamBuffer.Next) throws -> Data?? {
    switch next {
    case .wait: return nil
    case .bytes(let data): return .some(data)
    case .end(.finished): return .some(nil)
    case .end(.failed(let error)): throw error
    case .end(.cancelled): throw CancellationError()
    }
  }

  // MARK: Test hooks

  /// The buffer's counters, for tests: bytes in memory now and at most, received and spilled.
  var counters: (memory: Int, peakMemory: Int, received: Int64, spilled: Int64) {
    state.withLock {
      ($0.buffer.memoryBytes, $0.buffer.peakMemoryBytes, $0.buffer.receivedBytes, $0.buffer.spilledBytes)
    }
  }

  /// Whether the writer waits for the reader to make room, for tests.
  var writerIsWaiting: Bool { state.withLock { $0.writerWaits } }
}

extension ResponseStream.State {
  /// Takes the waiting reader out with what it gets now, as work to run after unlocking; `nil`
  /// if no reader waits or it must keep waiting.
  fileprivate mutating func takeWaiter() -> (@Sendable () -> Void)? {
    guard let waiter else { return nil }
    let next = buffer.next()
    if case .wait = next { return nil }
    self.waiter = nil
    let result: Result<Data?, any Error>
    switch next {
    case .wait: return nil
    case .bytes(let data): result = .success(data)
    case .end(.finished): result = .success(nil)
    case .end(.failed(let error)): result = .failure(error)
    case .end(.cancelled): result = .failure(CancellationError())
    }
    return { waiter.resume(with: result) }
  }
}

/// Cancels its stream when the last value that can read it is released: a response nobody
/// holds, or an iterator that stopped (a `break` out of `for try await`).
final class ResponseStreamLifetime: Sendable {
  let stream: ResponseStream
  /// The response's lifetime, kept alive by an iterator's.
  private let parent: ResponseStreamLifetime?
  /// Whether this lifetime is an iterator that failed to claim the body: its end cancels
  /// nothing.
  private let inert: Bool

  init(_ stream: ResponseStream, keeping parent: ResponseStreamLifetime? = nil, inert: Bool = false) {
    self.stream = stream
    self.parent = parent
    self.inert = inert
  }

  deinit {
    if !inert { stream.cancel() }
  }
}
