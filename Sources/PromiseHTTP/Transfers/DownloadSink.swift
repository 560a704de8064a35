import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The body sink of one download: writes the body of an acceptable response to the temporary
/// file, resumes it across attempts with `Range` and `If-Range`, and ends it exactly once.
///
/// Every attempt (retry) of the request goes through the same sink:
/// - `prepare` asks for the missing bytes (`Range: bytes=N-`, `If-Range: <validator>`) when the
///   file holds N > 0 bytes of a response with a known validator (a strong `ETag`, else
///   `Last-Modified`);
/// - `begin` appends a `206` whose `Content-Range` starts at N and whose validator is the same;
///   starts over on a `200` (a server that ignores `Range`, or an `If-Range` that no longer
///   matches); cuts the file and fails the attempt with a retried error
///   (`URLError.badServerResponse`) on a `206` for other bytes or of another version, so that
///   the retry asks for the whole body; leaves an unacceptable status to the client (collected
///   in memory for `HTTPError.unacceptableStatus`);
/// - `write` writes each chunk at its offset; a failed write (a full disk) is kept as a
///   `TransferError` and ends the exchange (`URLError.cannotWriteToFile`, not retried).
///
/// `complete` (the request succeeded) moves the file onto the destination; `abandon` (failure,
/// cancellation, deadline) removes or keeps it. Both run under the lock that `write` takes and
/// end the sink: a chunk that arrives afterwards (the delegate queue may still deliver one after
/// the exchange was cancelled) is dropped and cannot recreate or grow the file.
final class DownloadSink: ResponseBodySink, TransferSubject {
  /// Where the sink is in its life.
  enum Phase {
    /// Receiving: the temporary file is open.
    case open
    /// The file is at the destination; the promise is about to be fulfilled.
    case completed
    /// Abandoned (or completed and then undone by a cancellation): nothing more happens.
    case ended
  }

  private struct State {
    var file: DownloadFile
    var phase = Phase.open
    /// The bytes in the file: where the next chunk goes.
    var written: Int64
    /// The validator of the response whose bytes the file holds; `nil`: not resumable.
    var validator: String?
    /// The size of the whole body, when the current response says it.
    var expected: Int64?
    /// The offset the current attempt asked for with `Range`; 0 when it asked for everything.
    var askedOffset: Int64 = 0
    /// The first failure of the file, reported instead of the exchange's error.
    var fileError: TransferError?
    /// When the current attempt last showed life (sent, head, bytes), on the client's clock;
    /// `nil` before the first attempt is sent.
    var lastActivity: Duration?
  }

  private let state: LockedBox<State>
  private let reporter: ProgressReporter?
  private let scheduler: any PromiseScheduler
  /// The statuses whose body goes to the file.
  private let acceptable: Range<Int>
  /// The request's URL, redacted, for errors.
  private let errorURL: URL?
  /// The request's URL, redacted, as the record of a kept file names it.
  private let recordURL: String
  private let options: DownloadOptions
  /// libcurl's idle timeout, a backstop behind the client's own (`URLRequest.timeoutInterval`).
  private let transportIdleTimeout: TimeInterval

  init(
    file: DownloadFile, options: DownloadOptions, reporter: ProgressReporter?,
    scheduler: any PromiseScheduler,
    acceptable: Range<Int>, errorURL: URL?, recordURL: String, idleTimeout: Duration
  ) {
    var initial = State(file: file, written: 0)
    if let resumable = file.resumable {
      initial.written = resumable.length
      initial.validator = resumable.validator
    }
    self.state = LockedBox(initial)
    self.reporter = reporter
    self.scheduler = scheduler
    self.acceptable = acceptable
    self.errorURL = errorURL
    self.recordURL = recordURL
    self.options = options
    self.transportIdleTimeout = RequestStateMachine.transportTimeoutInterval(remaining: idleTimeout)
  }

  /// The first problem with the file, if any: the download fails with it.
  var fileError: TransferError? { state.withLock { $0.fileError } }

  // MARK: ResponseBodySink

  func prepare(_ request: URLRequest) -> URLRequest {
    var request = request
    let now = scheduler.now
    let range: (offset: Int64, validator: String)? = state.withLock { state in
      state.lastActivity = now
      state.askedOffset = 0
      guard state.phase == .open, state.written > 0, let validator = state.validator else { return nil }
      state.askedOffset = state.written
      return (state.written, validator)
    }
    if let range {
      request.setValue("bytes=\(range.offset)-", forHTTPHeaderField: "Range")
      request.setValue(range.validator, forHTTPHeaderField: "If-Range")
    } else {
      request.setValue(nil, forHTTPHeaderField: "Range")
      request.setValue(nil, forHTTPHeaderField: "If-Range")
    }
    // FoundationNetworking's `timeoutInterval` is an idle timeout (its timer restarts on every
    // callback of libcurl): kept just beyond the client's own, which comes first.
    request.timeoutInterval = transportIdleTimeout
    return request
  }

  func begin(_ response: HTTPURLResponse) -> ResponseBodyDecision {
    if response.statusCode == 416, let error = rangeRefused() { return .fail(error) }
    guard acceptable.contains(response.statusCode) else { return .collect }
    let encoded =
      response.value(forHTTPHeaderField: "Content-Encoding").map { !$0.isEmpty && $0 != "identity" } ?? false
    // Offsets of a decoded body are not the server's: such a body is not resumable.
    let validator = encoded ? nil : Self.validator(of: response)
    let declared = encoded ? nil : Self.declaredLength(of: response)
    let now = scheduler.now
    let outcome: Result<(Int64, Int64?), HTTPError> = state.withLock { state in
      guard state.phase == .open else {
        return .failure(.transportFailure(URLError(.cancelled), url: errorURL))
      }
      state.lastActivity = now
      var start: Int64 = 0
      if response.statusCode == 206 {
        let range = Self.contentRange(response.value(forHTTPHeaderField: "Content-Range"))
        let sameVersion = state.askedOffset == 0 || (validator != nil && validator == state.validator)
        guard let range, range.start == state.askedOffset, sameVersion else {
          let asked = state.askedOffset
          let previous = state.validator
          state.validator = nil
          if let error = cut(&state, to: 0) { return .failure(error) }
          let what =
            !sameVersion
            ? "a different version of the resource (validator \(validator ?? "none") where \(previous ?? "none") was asked)"
            : "the range '\(response.value(forHTTPHeaderField: "Content-Range") ?? "")' where bytes \(asked)- were asked"
          return .failure(
            .transportFailure(
              URLError(
                .badServerResponse,
                userInfo: [NSLocalizedDescriptionKey: "the server sent \(what); the download starts over"]),
              url: errorURL))
        }
        // A 206's Content-Length is the length of its range (RFC 9110 §14.4): one that says
        // otherwise (or a size whose sum overflows) is not a body this file can be checked against.
        let rangeLength = range.end - range.start + 1
        if let declared, declared != rangeLength {
          state.validator = nil
          if let error = cut(&state, to: 0) { return .failure(error) }
          return .failure(
            .transportFailure(
              URLError(
                .badServerResponse,
                userInfo: [
                  NSLocalizedDescriptionKey:
                    "the server sent Content-Length \(declared) for the range '\(response.value(forHTTPHeaderField: "Content-Range") ?? "")' of \(rangeLength) bytes; the download starts over"
                ]),
              url: errorURL))
        }
        start = range.start
        state.expected = range.total ?? (range.end + 1)
      } else {
        state.validator = validator
        state.expected = declared
      }
      if let error = cut(&state, to: start) { return .failure(error) }
      return .success((start, state.expected))
    }
    switch outcome {
    case .success(let (start, expected)):
      reporter?.update(completed: start, expected: expected)
      return .consume
    case .failure(let error):
      return .fail(error)
    }
  }

  func write(_ data: Data) -> HTTPError? {
    let now = scheduler.now
    let outcome: Result<(Int64, Int64?), HTTPError>? = state.withLock { state in
      // Ended (cancelled, failed, timed out): the chunk is dropped and the file left alone.
      guard state.phase == .open, state.fileError == nil else { return nil }
      if let error = state.file.write(data, at: state.written) { return .failure(fail(&state, error)) }
      state.written += Int64(data.count)
      state.lastActivity = now
      return .success((state.written, state.expected))
    }
    switch outcome {
    case .success(let (written, expected)):
      reporter?.update(completed: written, expected: expected)
      return nil
    case .failure(let error):
      return error
    case nil:
      return nil
    }
  }

  /// Starts the file over after a `416 Range Not Satisfiable` for the range this attempt asked.
  ///
  /// The kept bytes are no longer a prefix of the resource: the attempt fails with a retried
  /// error so that the next one asks for everything. `nil` when no range was asked.
  private func rangeRefused() -> HTTPError? {
    state.withLock { state in
      guard state.phase == .open, state.askedOffset > 0 else { return nil }
      let asked = state.askedOffset
      state.validator = nil
      if let error = cut(&state, to: 0) { return error }
      return .transportFailure(
        URLError(
          .badServerResponse,
          userInfo: [
            NSLocalizedDescriptionKey:
              "the server cannot send bytes \(asked)- (416 Range Not Satisfiable); the download starts over"
          ]), url: errorURL)
    }
  }

  /// Cuts the file to `length` bytes, unless it has that length already (the file always holds
  /// exactly `written` bytes); returns the exchange's error when that fails.
  private func cut(_ state: inout State, to length: Int64) -> HTTPError? {
    guard state.written != length else { return nil }
    state.written = length
    return state.file.truncate(to: length).map { fail(&state, $0) }
  }

  /// Records a file error and returns the exchange's error for it (not retried).
  private func fail(_ state: inout State, _ error: TransferError) -> HTTPError {
    if state.fileError == nil { state.fileError = error }
    return .transportFailure(
      URLError(.cannotWriteToFile, userInfo: [NSLocalizedDescriptionKey: error.description]), url: errorURL)
  }

  // MARK: The end

  /// The request succeeded with `response`: moves the file onto the destination, reports the
  /// final progress, and then calls `settle` with the download, or why it failed (the file
  /// then discarded).
  func complete(
    _ response: HTTPResponse, then settle: @escaping @Sendable (Result<HTTPDownload, any Error>) -> Void
  ) {
    let outcome: Result<HTTPDownload, any Error> = state.withLock { state in
      guard state.phase == .open else { return .failure(CancellationError()) }
      var error: (any Error)? = state.fileError
      if error == nil, let expected = state.expected, state.written != expected {
        // libcurl reports a body cut short itself; this is the backstop that keeps a short
        // file from ever being delivered as complete.
        error = HTTPError.transportFailure(
          URLError(
            .networkConnectionLost,
            userInfo: [
              NSLocalizedDescriptionKey: "the body ended after \(state.written) of \(expected) bytes"
            ]), url: errorURL)
      }
      if error == nil, let failure = state.file.commit(replacing: options.replacesExistingFile) {
        error = failure
      }
      if let error {
        state.phase = .ended
        state.file.discard(
          keeping: options.keepsPartialFileOnFailure && state.fileError == nil, validator: state.validator,
          requestURL: recordURL)
        return .failure(error)
      }
      state.phase = .completed
      return .success(
        HTTPDownload(response: response, fileURL: state.file.destination, byteCount: state.written))
    }
    switch outcome {
    case .success(let download) where reporter != nil:
      reporter?.finish(completed: download.byteCount, expected: download.byteCount) { settle(outcome) }
    case .success:
      settle(outcome)
    case .failure:
      reporter?.abandon()
      settle(outcome)
    }
  }

  /// Ends the download that failed, was cancelled or passed its deadline.
  ///
  /// Removes the temporary file (or keeps it, with its record, under
  /// `keepsPartialFileOnFailure`); with `undoingCompletion`, a file already moved onto the
  /// destination is removed too (a cancellation that came after the move but before the promise
  /// was fulfilled). Runs once; later calls do nothing.
  func abandon(undoingCompletion: Bool) {
    state.withLock { state in
      switch state.phase {
      case .open:
        state.phase = .ended
        state.file.discard(
          keeping: options.keepsPartialFileOnFailure && state.fileError == nil, validator: state.validator,
          requestURL: recordURL)
      case .completed where undoingCompletion:
        state.phase = .ended
        unlink(state.file.destination.path)
      case .completed, .ended:
        break
      }
    }
    reporter?.abandon()
  }

  /// What the download is doing at `now`, on the client's clock: it shows life when an
  /// attempt is sent, a head arrives, and bytes are written.
  func activity(at now: Duration) -> TransferActivity {
    state.withLock { state in
      guard state.phase == .open else { return .ended }
      return state.lastActivity.map { .idle(now - $0) } ?? .waiting
    }
  }

  func abandon(cancelled: Bool) {
    // After the request's outcome, a completed file is undone: a cancelled promise leaves no file.
    abandon(undoingCompletion: cancelled)
  }

  func failure(for error: any Error) -> any Error {
    fileError ?? error
  }

  // MARK: Parsing

  /// The strong `ETag` of `response`, else its `Last-Modified`; `nil` when it has neither (or
  /// only a weak `ETag`, which `If-Range` must not use).
  static func validator(of response: HTTPURLResponse) -> String? {
    if let tag = response.value(forHTTPHeaderField: "ETag")?.trimmingCharacters(in: .whitespaces),
      !tag.isEmpty, !tag.hasPrefix("W/")
    {
      return tag
    }
    if let date = response.value(forHTTPHeaderField: "Last-Modified")?.trimmingCharacters(in: .whitespaces),
      !date.isEmpty
    {
      return date
    }
    return nil
  }

  /// The length of the body `response` declares in its `Content-Length`, or `nil`: none, or a
  /// `Transfer-Encoding` as well, which overrides it (RFC 9112 §6.3: the body is framed by its
  /// chunks, and the Content-Length says nothing of it).
  static func declaredLength(of response: HTTPURLResponse) -> Int64? {
    guard response.value(forHTTPHeaderField: "Transfer-Encoding") == nil, response.expectedContentLength >= 0
    else { return nil }
    return response.expectedContentLength
  }

  /// A decimal number of digits only (no sign, no space).
  private static func number(_ text: Substring) -> Int64? {
    guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
      return nil
    }
    return Int64(text)
  }

  /// Parses `bytes first-last/total` (`total` may be `*`); `nil` for anything else.
  static func contentRange(_ value: String?) -> (start: Int64, end: Int64, total: Int64?)? {
    // The unit is an ASCII token, compared as ASCII (no Unicode case folding).
    guard let value = value.map({ FieldSyntax.trimmingWhitespace(Array($0.utf8)) }), value.count > 6,
      FieldSyntax.equalsIgnoringASCIICase(String(decoding: value.prefix(6), as: UTF8.self), "bytes ")
    else {
      return nil
    }
    let spec = String(decoding: FieldSyntax.trimmingWhitespace(value.dropFirst(6)), as: UTF8.self)
    let parts = spec.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2 else { return nil }
    let bounds = parts[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    guard bounds.count == 2, let start = number(bounds[0]), let end = number(bounds[1]), end >= start,
      end < Int64.max  // so that the range's length and end + 1 are numbers too
    else {
      return nil
    }
    let total: Int64?
    if parts[1] == "*" {
      total = nil
    } else {
      guard let value = number(parts[1]), value > end else { return nil }
      total = value
    }
    return (start, end, total)
  }
}
