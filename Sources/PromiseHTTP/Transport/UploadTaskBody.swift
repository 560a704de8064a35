import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What one task sends as its body, when it is not the request's `httpBody`.
enum UploadTaskBody {
  /// A file, read by FoundationNetworking without blocking (`uploadTask(with:fromFile:)`) and
  /// sent with `Content-Length`: its size.
  case file(URL)
  /// A stream FoundationNetworking reads on its work queue (one for every session of the
  /// process: a read must not wait), sent with chunked transfer coding (given a `Content-Length`
  /// field as well, libcurl sends both).
  case stream(any UploadBodyStream)
}

/// The body of an upload, which gives each task (each attempt, each hop that repeats the body:
/// a 307 or 308) its own copy from the start.
protocol UploadBodySource: AnyObject, Sendable {
  /// Returns the body of a new task, from its start.
  func makeTaskBody() -> UploadTaskBody
  /// Returns a stream to replace `stream` when libcurl rewinds the body of a task (to resend it
  /// on a new connection): a new one from the start; `nil` for a file, which FoundationNetworking
  /// reads itself.
  func rewound(_ stream: (any UploadBodyStream)?) -> (any UploadBodyStream)?
}

/// A body read a chunk at a time by the thread that sends it (the socket transport's), which
/// waits for each: a sequence of chunks sent as it is produced, once.
protocol SequentialUploadBody: UploadBodyStream {
  /// The total the chunks must add up to, if known (sent as `Content-Length`).
  var length: Int64? { get }
  /// Whether the body has stopped (failed, or aborted) before its end.
  var isStopped: Bool { get }
  /// Returns the next chunk, waiting for it.
  func next() -> SequentialUploadChunk
  /// Ends the body with `failure` (a length that does not add up, say), unless it has ended.
  func stop(with failure: HTTPError?)
}

/// What a `SequentialUploadBody` gives next.
enum SequentialUploadChunk {
  case chunk(Data)
  /// The body ended.
  case end
  /// The body failed, or the upload was stopped: its `failure` says why, if anything did.
  case stopped
}

/// A body FoundationNetworking reads as an `InputStream` (`URLRequest.httpBodyStream`).
protocol UploadBodyStream: AnyObject, Sendable {
  /// Returns the stream a task reads (one per task).
  func makeInputStream() -> InputStream
  /// Makes every later read fail at once, and closes what the stream reads; does nothing more
  /// when called again. Called before the task is cancelled and when it completes.
  func abort()
  /// The error the body failed with while being read (a file that changed or holds the form's
  /// boundary), which explains the transport error it caused.
  var failure: HTTPError? { get }
}

/// Follows an upload: its attempts, the bytes it has sent and received (for its progress and
/// its idle timer), and how it ended.
protocol UploadObserver: AnyObject, Sendable {
  /// Returns the request of an attempt about to be sent, adapted (its transport timeout).
  func prepare(_ request: URLRequest) -> URLRequest
  /// The current task has sent `totalBytes` of its body (counted from 0 by each task).
  func sent(totalBytes: Int64)
  /// A response head or body bytes arrived for the current task.
  func received()
  /// The request ended: fulfilled (`succeeded`), or rejected or cancelled; `settle` settles
  /// its promise, called once the upload's final progress update is delivered.
  func requestFinished(succeeded: Bool, then settle: @escaping @Sendable () -> Void)
}
