import LoopbackHTTPServer

/// A request an example's server received, as the hidden assertions of a snippet read it.
///
/// A snippet file imports only the modules its page shows (DocImportsTests), and no page shows
/// the loopback server's module; under `MemberImportVisibility` a snippet could not read a
/// `RecordedRequest`'s members, so the servers hand out this copy of what the assertions need.
struct ReceivedRequest: Sendable {
  let method: String
  /// The path, without the query.
  let path: String
  /// The query, without the `?`, if any.
  let query: String?
  let body: [UInt8]
  private let recorded: RecordedRequest

  init(_ recorded: RecordedRequest) {
    self.method = recorded.method
    self.path = recorded.pathWithoutQuery
    self.query = recorded.query
    self.body = recorded.body
    self.recorded = recorded
  }

  /// The value of the first header field named `name` (compared without case), if any.
  func header(_ name: String) -> String? { recorded.header(name) }
}
