import Foundation

/// A completed download: the response's head and the file its body was written to.
public struct HTTPDownload: Sendable {
  /// The final response: status, headers, URL; its `body` is empty (the body is in the file).
  ///
  /// For a download resumed with `Range`, this is the last attempt's `206 Partial Content`.
  public var response: HTTPResponse
  /// The file holding the whole body: the destination the download was given.
  public var fileURL: URL
  /// The size of the file, in bytes.
  public var byteCount: Int64

  /// Creates a download result.
  public init(response: HTTPResponse, fileURL: URL, byteCount: Int64) {
    self.response = response
    self.fileURL = fileURL
    self.byteCount = byteCount
  }
}

/// How `HTTPClient.download(_:to:options:progress:)` treats the files it writes.
public struct DownloadOptions: Sendable, Hashable {
  /// Whether a file already at the destination is replaced; `false` by default: the download
  /// is refused with `TransferError.destinationExists` before anything is sent.
  public var replacesExistingFile: Bool
  /// Whether a download that fails (or is cancelled, or passes its deadline) keeps its
  /// temporary file, so that a later download to the same destination resumes from it;
  /// `false` by default: the temporary file is removed.
  ///
  /// The file is `.<destination name>.promisehttp-download` beside the destination, with a
  /// small `.resume` file naming the URL and the validator (`ETag` or `Last-Modified`) its bytes
  /// belong to. Without a validator the bytes cannot be trusted and are not resumed.
  public var keepsPartialFileOnFailure: Bool
  /// Whether a download continues from the temporary file an earlier failed one kept.
  ///
  /// `true` by default: the download asks only for the missing bytes, with `Range` and
  /// `If-Range` (see `keepsPartialFileOnFailure`). The bytes are used only for the same URL
  /// and a known validator; a server that answers with the whole body restarts it cleanly.
  public var resumesPartialFile: Bool

  /// Creates options; every parameter defaults to the documented default.
  public init(
    replacesExistingFile: Bool = false, keepsPartialFileOnFailure: Bool = false,
    resumesPartialFile: Bool = true
  ) {
    self.replacesExistingFile = replacesExistingFile
    self.keepsPartialFileOnFailure = keepsPartialFileOnFailure
    self.resumesPartialFile = resumesPartialFile
  }
}
