import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Turns an `HTTPRequest` into the `URLRequest` a client sends, or the reason it must not be sent.
///
/// A pure value: no session, no clock, no I/O, so every rule is unit-tested on its own
/// (`RequestBuilderTests`). The rules, in order:
/// 1. a path with a `.` or `..` segment (also percent-encoded) is refused (see `HTTPPath`);
/// 2. a relative path is appended to the base URL's path (a leading `/` is ignored, the base
///    URL's own query and fragment are dropped); a path with `://` is an absolute URL;
/// 3. query items are appended, names and values percent-encoded (everything but RFC 3986
///    unreserved characters, so `+`, `&` and `=` too);
/// 4. only `http` and `https` URLs with a host are sent;
/// 5. the default headers are merged under the request's own; those among the sensitive ones
///    are not sent to another origin than the base URL's;
/// 6. a header field with CR, LF or another control byte is refused.
struct RequestBuilder: Sendable {
  /// The URL that relative paths are appended to.
  let baseURL: URL
  /// Sent with every request, under the request's own headers.
  let defaultHeaders: HTTPHeaders
  /// The credential fields: kept from other origins, redacted in error messages.
  let sensitiveHeaders: HeaderNameSet
  /// The secret query parameters, redacted in error messages.
  var sensitiveParameters: ParameterNameSet = .defaultSensitive

  /// Returns the `URLRequest` for `request`, or `HTTPError.invalidRequest` saying what is wrong.
  func urlRequest(for request: HTTPRequest) -> Result<URLRequest, HTTPError> {
    if let problem = HTTPPath.dotSegmentProblem(in: request.path) {
      return .failure(.invalidRequest(problem))
    }
    guard let url = Self.url(base: baseURL, path: request.path, query: request.query) else {
      return .failure(
        .invalidRequest(
          "the path '\(Redaction.reference(request.path, parameters: sensitiveParameters))' does not make a"
            + " valid URL with \(Redaction.text(baseURL, parameters: sensitiveParameters))"))
    }
    guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
      return .failure(
        .invalidRequest(
          "only http and https URLs with a host can be sent: \(Redaction.text(url, parameters: sensitiveParameters))"
        ))
    }
    var urlRequest = URLRequest(url: url)
    urlRequest.httpMethod = request.method.rawValue
    for field in headers(for: request, to: url) {
      if let problem = HTTPRequest.headerProblem(
        name: field.name, value: field.value, sensitive: sensitiveHeaders)
      {
        return .failure(.invalidRequest(problem))
      }
      urlRequest.setValue(field.value, forHTTPHeaderField: field.name)
    }
    if let body = request.body { urlRequest.httpBody = body }
    return .success(urlRequest)
  }

  /// The default headers under the request's own; without the sensitive defaults off-origin.
  func headers(for request: HTTPRequest, to url: URL) -> HTTPHeaders {
    var merged = defaultHeaders
    if !Origin.same(url, baseURL) {
      // An absolute URL elsewhere (a link from a response, say) gets no default credential.
      for field in defaultHeaders where sensitiveHeaders.contains(field.name) { merged[field.name] = nil }
    }
    for field in request.headers { merged[field.name] = field.value }
    return merged
  }

  /// `base` + `path` (a leading `/` is ignored) + the encoded query; or `path` if absolute.
  ///
  /// - Returns: The URL, or `nil` when the parts do not make one.
  static func url(base: URL, path: String, query: [URLQueryItem]) -> URL? {
    let url: URL?
    if let scheme = path.range(of: "://") {
      // The authority as written; what follows it, encoded as a relative path is.
      let authorityEnd = path[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" }
      let end = authorityEnd ?? path.endIndex
      url = URL(string: String(path[..<end]) + PercentEncoding.encodeInvalid(String(path[end...])))
    } else {
      var prefix = base.absoluteString
      if let cut = prefix.firstIndex(where: { $0 == "?" || $0 == "#" }) { prefix = String(prefix[..<cut]) }
      if !prefix.hasSuffix("/") { prefix += "/" }
      url = URL(string: prefix + PercentEncoding.encodeInvalid(String(path.drop { $0 == "/" })))
    }
    guard let url, !query.isEmpty else { return url }
    guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
    let encoded = query.map {
      "\(PercentEncoding.encode($0.name, keeping: PercentEncoding.unreserved))="
        + PercentEncoding.encode($0.value ?? "", keeping: PercentEncoding.unreserved)
    }
    components.percentEncodedQuery = ([components.percentEncodedQuery].compactMap { $0 } + encoded).joined(
      separator: "&")
    return components.url
  }
}
