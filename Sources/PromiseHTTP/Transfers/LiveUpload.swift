import Foundation
import Promises

/// The body of a `.stream` upload sent as its sequence yields it, over the socket transport.
///
/// The socket task's thread may wait, so it takes each chunk from the sequence as it sends:
/// the sequence runs in a task of its own and hands one chunk at a time over (`put`), and the
/// next one is asked for only once the thread has taken it — the sequence is read at the pace
/// of the connection, one chunk ahead. FoundationNetworking reads a body stream on a queue every
/// session shares, where a read must not wait, so through `URLSession` the chunks are written
/// to a temporary file first (`UploadSpool`).
///
/// A sequence is read once: the first task gets it; a second one (a retry, a 307 or 308 that
/// repeats the body, an authenticator's replay after a 401) gets a stream that fails at once
/// with `HTTPError.invalidRequest`. The upload's retry policy is `.none`.
final class LiveUploadSource: UploadBodySource {
  private let stream: LiveUploadStream
  private let taken = LockedBox(false)

  init(_ producer: ChunkProducer, length: Int64?) {
    stream = LiveUploadStream(producer, length: length)
  }

  func makeTaskBody() -> UploadTaskBody {
    let first = taken.withLock { taken in
      defer { taken = true }
      return !taken
    }
    guard first else {
      return .stream(
        LiveUploadStream(
          failed: .invalidRequest(
            "the stream of chunks was asked to be sent again (a retry, a 307 or 308, or a replay after a 401):"
              + " a sequence is read once; upload a file to make the body repeatable")))
    }
    return .stream(stream)
  }

  func rewound(_ stream: (any UploadBodyStream)?) -> (any UploadBodyStream)? {
    // The socket transport never rewinds.
    nil
  }

  /// Stops the sequence once the upload has settled, whether or not it was ever sent (a
  /// request refused or cancelled before its exchange leaves no task to abort the stream).
  func uploadSettled() {
    stream.abort()
  }
}

/// One reading of a sequence of chunks: handed over one at a time from the task that runs the
/// sequence to the socket task's thread, which waits for each.
final class LiveUploadStream: SequentialUploadBody {
  private struct State {
    /// The chunk put and not taken yet.
    var chunk: Data?
    /// The producer waiting for `chunk` to be taken.
    var producer: CheckedContinuation<Bool, Never>?
    var ended = false
    var stopped = false
    var failure: HTTPError?
    var reading: Task<Void, Never>?
    var started = false
    /// Chunks dropped since the stream stopped (see `put`).
    var drained = 0

    /// After a stop: whether the sequence may go on (its chunk is dropped); `nil` before.
    mutating func drain() -> Bool? {
      guard stopped else { return nil }
      drained += 1
      return drained <= LiveUploadStream.drainLimit
    }
  }

  private let state = LockedBox(State())
  /// Signalled whenever there is something for the sending thread: a chunk, the end, a stop.
  private let ready = DispatchSemaphore(value: 0)
  private let producer: ChunkProducer?
  /// The total the chunks must add up to, if known.
  let length: Int64?

  init(_ producer: ChunkProducer, length: Int64?) {
    self.producer = producer
    self.length = length
  }

  /// A stream that fails at once with `failure`.
  init(failed failure: HTTPError) {
    producer = nil
    length = nil
    state.withLock {
      $0.failure = failure
      $0.stopped = true
    }
  }

  var failure: HTTPError? { state.withLock { $0.failure } }

  /// Whether the stream has stopped (failed, or aborted) before its end.
  var isStopped: Bool { state.withLock { $0.stopped } }

  func makeInputStream() -> InputStream {
    // Never read through FoundationNetworking (see `Transport.makeTask`): a read here would wait
    // on the queue every session shares.
    preconditionFailure("a live upload stream is sent by the socket transport only")
  }

  func abort() {
    stop(with: nil)
  }

  /// Ends the stream with `failure` (a length that does not add up, say), unless it has ended.
  func stop(with failure: HTTPError?) {
    let (waiting, reading, neverRead) = state.withLock { state in
      guard !state.stopped else {
        return (CheckedContinuation<Bool, Never>?.none, Task<Void, Never>?.none, false)
      }
      state.stopped = true
      if state.failure == nil { state.failure = failure }
      state.chunk = nil
      let neverRead = !state.started
      state.started = true
      defer { state.producer = nil }
      return (state.producer, state.reading, neverRead)
    }
    // Cancelled first, so that the sequence sees the cancellation when asked for more (`put`).
    reading?.cancel()
    waiting?.resume(returning: true)
    if neverRead, let producer {
      // Stopped before the first chunk was asked for: the sequence still learns that it is
      // over (an `AsyncStream`'s `onTermination`), from a task cancelled at once that drops
      // what it takes.
      Task { [self] in try? await producer.run { chunk in await self.put(chunk) } }.cancel()
    }
    ready.signal()
  }

  /// Returns the next chunk, waiting for it; starts reading the sequence on the first call.
  func next() -> SequentialUploadChunk {
    startReading()
    while true {
      let (next, producer) = state.withLock {
        state -> (SequentialUploadChunk?, CheckedContinuation<Bool, Never>?) in
        if state.stopped { return (.stopped, nil) }
        if let chunk = state.chunk {
          state.chunk = nil
          defer { state.producer = nil }
          return (.chunk(chunk), state.producer)
        }
        if state.ended { return (.end, nil) }
        return (nil, nil)
      }
      if let next {
        // The sequence may make the next chunk while this one is sent.
        producer?.resume(returning: true)
        return next
      }
      ready.wait()
    }
  }

  private func startReading() {
    guard let producer else { return }
    state.withLock { state in
      guard !state.started, !state.stopped else { return }
      state.started = true
      state.reading = Task { [self] in
        do {
          try await producer.run { chunk in await self.put(chunk) }
          finish(failure: nil)
        } catch {
          finish(failure: .invalidRequest("the stream of chunks failed: \(error)"))
        }
      }
    }
  }

  /// Hands `chunk` over; returns once it is taken (`true`) or the upload stopped (`false`).
  ///
  /// Once the stream has stopped, a chunk is dropped and the sequence asked for the next one, up
  /// to `drainLimit` times, before it is told to stop: its task is cancelled by then, and a
  /// sequence learns of that only when asked for an element it does not have yet (an
  /// `AsyncStream` then runs its `onTermination`); one that had chunks buffered would otherwise
  /// never know that nobody reads it.
  private func put(_ chunk: Data) async -> Bool {
    if let goOn = state.withLock({ $0.drain() }) { return goOn }
    guard !chunk.isEmpty else { return true }
    return await withCheckedContinuation { continuation in
      let drained = state.withLock { state -> Bool? in
        if let goOn = state.drain() { return goOn }
        state.chunk = chunk
        state.producer = continuation
        return nil
      }
      if let drained {
        continuation.resume(returning: drained)
      } else {
        ready.signal()
      }
    }
  }

  /// The most chunks dropped after a stop before the sequence is told to stop (`put`).
  static let drainLimit = 64

  /// The sequence returned (`failure` nil) or threw.
  private func finish(failure: HTTPError?) {
    state.withLock { state in
      guard !state.stopped, !state.ended else { return }
      if let failure {
        state.failure = failure
        state.stopped = true
      } else {
        state.ended = true
      }
    }
    ready.signal()
  }
}
