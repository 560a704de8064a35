import Foundation

/// The body of an upload: bytes, a file, a stream of chunks, or a multipart form.
///
/// Send one with `HTTPClient.upload(_:to:method:query:headers:deadline:progress:file:line:)`.
/// How each kind goes on the wire:
///
/// | body | framing | memory | a retry, or a 307/308 |
/// | --- | --- | --- | --- |
/// | `data` | `Content-Length` | the bytes | sends them again |
/// | `file` | `Content-Length`: the file's size | one buffer (256 KiB over a socket, 16 KiB pieces through `URLSession`) | sends it again from the start |
/// | `multipart` | `Content-Length` when every part is in memory, else chunked | a 64 KiB read of a file | sends it again from the start |
/// | `stream` over the socket transport | `Content-Length` if you give `length`, else chunked; sent as the sequence yields it | one chunk ahead | never: the sequence is read once (not retried; a 307/308 rejects) |
/// | `stream` through `URLSession` | `Content-Length`, from a temporary file it is written to first | one chunk | sends the file again |
///
/// On Linux an upload goes over the socket transport, plain HTTP or HTTPS (see
/// `HTTPClient.Engine`); through a proxy other than `http://` or SOCKS5, or with the `.urlSession` engine, through the client's
/// `URLSession`. A form with files is always sent chunked: FoundationNetworking, given a
/// `Content-Length` field with a body it reads as a stream, sends both, which is not a valid
/// request. A server that needs the length of a form with files gets it from a file:
/// `MultipartForm.write(to:)`, then `.file(url)`.
public struct HTTPBody: Sendable {
  enum Content: Sendable {
    case data(Data)
    case file(URL)
    case stream(ChunkProducer, length: Int64?)
    case multipart(MultipartForm)
  }

  let content: Content

  /// Returns a body of `data`, sent with `Content-Length`.
  public static func data(_ data: Data) -> HTTPBody {
    HTTPBody(content: .data(data))
  }

  /// Returns a body read from the file at `url`, in chunks, never loaded whole; sent with
  /// `Content-Length`, its size.
  ///
  /// A retry, or a redirect that repeats the body (307, 308), sends the file again from its
  /// start. A file that cannot be read (missing, a directory, no permission) rejects the upload
  /// with `HTTPError.invalidRequest` naming it, before anything is sent.
  public static func file(_ url: URL) -> HTTPBody {
    HTTPBody(content: .file(url))
  }

  /// Returns a body of the chunks `chunks` yields; `length`, if you know it, is the total they
  /// must add up to.
  ///
  /// Over the socket transport (see `HTTPClient.Engine`) the chunks are
  /// sent as the sequence yields them, one chunk ahead of the connection, with `Content-Length`
  /// when `length` is given, else chunked. The sequence is read once: the upload is not retried,
  /// and a 307 or 308 that would send the body again rejects with `HTTPError.invalidRequest`.
  ///
  /// Through `URLSession` (a proxy other than `http://` or SOCKS5, the `.urlSession` engine) the chunks are written to a temporary file as they
  /// come (memory: one chunk), and the file is sent once the sequence ends, with its
  /// `Content-Length`, then removed when the request settles; a retry sends the same bytes
  /// again, as for a file. FoundationNetworking reads a body stream on a work queue that every
  /// `URLSession` of the process shares, and cannot be told to come back later: waiting there for
  /// a chunk blocked every other request of the process, and the threads that started them
  /// (measured on Swift 6.3.1), and deadlocks when the chunks come from a request.
  ///
  /// When the sequence throws, or its chunks do not add up to `length`, the upload is rejected
  /// with `HTTPError.invalidRequest` saying so (through `URLSession`, before anything is sent;
  /// over a socket, the connection is closed mid-body). Cancelling the promise stops the sequence
  /// (its task is cancelled).
  ///
  /// - Parameters:
  ///   - chunks: The chunks of the body, in order; empty chunks are skipped.
  ///   - length: The number of bytes the chunks add up to, for progress and as a check; `nil`
  ///     when it is not known.
  /// - Returns: The body.
  public static func stream<Chunks: AsyncSequence & Sendable>(
    _ chunks: Chunks, length: Int64? = nil
  ) -> HTTPBody where Chunks.Element == Data {
    let producer = ChunkProducer { deliver in
      for try await chunk in chunks {
        guard await deliver(chunk) else { return }
      }
    }
    return HTTPBody(content: .stream(producer, length: length))
  }

  /// Returns a `multipart/form-data` body of `form` (RFC 7578), with its `Content-Type` and
  /// boundary; files are read from disk in chunks as the body is sent.
  public static func multipart(_ form: MultipartForm) -> HTTPBody {
    HTTPBody(content: .multipart(form))
  }

  /// The number of bytes the body sends, or `nil` when it is not known yet (a stream of chunks
  /// without a `length`) or cannot be (a file that cannot be read).
  ///
  /// The sizes of files are read now; a file that changes before it is sent changes the body.
  public var length: Int64? {
    switch content {
    case .data(let data): Int64(data.count)
    case .file(let url): try? UploadFile.size(of: url).get()
    case .stream(_, let length): length
    case .multipart(let form): try? form.plan().get().length
    }
  }
}

/// Runs a sequence of chunks, handing each to `deliver`, which returns `false` to stop.
struct ChunkProducer: Sendable {
  let run: @Sendable (_ deliver: @Sendable (Data) async -> Bool) async throws -> Void
}
