import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The redirect rules: which hops are followed and what a hop to another origin may carry.
///
/// FoundationNetworking on Linux follows redirects with every header of the original request,
/// `Authorization` included, whatever the target host; and it rewrites a `Location` with
/// another scheme but no host (`file:///etc/passwd`, `data:,hello`) into a path on the current
/// origin (`/etc/passwd`, `/,hello`) and proposes to follow that (measured on Swift 6.3.1). The
/// client routes each hop through these rules instead, reading the raw `Location` itself.
enum Redirects {
  /// What to do with one redirect hop.
  enum Decision: Equatable {
    /// Follow the hop with this request (sensitive headers removed when the origin changed).
    case follow(URLRequest)
    /// Do not follow: the 3xx response is the answer (`RedirectPolicy.doNotFollow`).
    case deliver
    /// Refuse: the hop would exceed the limit or revisit a URL (a loop).
    case tooManyRedirects(limit: Int)
    /// Refuse: the target is not `http` or `https`.
    case unsupportedScheme(String)
  }

  /// Whether `a` and `b` have the same scheme, host and port (see `Origin`).
  static func isSameOrigin(_ a: URL, _ b: URL) -> Bool {
    Origin.same(a, b)
  }

  /// Removes the sensitive fields of `configuration.httpAdditionalHeaders`; returns them under
  /// `headers` (whose fields win), to be sent as default headers.
  ///
  /// FoundationNetworking adds the session's additional headers to every request, redirect hops
  /// to another origin and absolute URLs elsewhere included (measured on Swift 6.3.1); the
  /// client's default headers are sent to the base URL's origin only.
  static func takeSensitiveHeaders(
    from configuration: URLSessionConfiguration, sensitive names: HeaderNameSet, under headers: HTTPHeaders
  ) -> HTTPHeaders {
    guard var additional = configuration.httpAdditionalHeaders else { return headers }
    var taken = HTTPHeaders()
    for (key, value) in additional {
      guard let name = key.base as? String, names.contains(name) else { continue }
      taken.add(name: name, value: value as? String ?? "\(value)")
      additional[key] = nil
    }
    guard taken.count > 0 else { return headers }
    configuration.httpAdditionalHeaders = additional
    for field in headers { taken[field.name] = field.value }
    return taken
  }

  /// Returns the scheme of a URI reference, lowercased, or `nil` when it is relative.
  ///
  /// RFC 3986 §3.1 and §4.2: a scheme is a letter followed by letters, digits, `+`, `-` or `.`,
  /// then `:`; a reference whose first `:` comes after a `/`, `?` or `#` (or that has none) is
  /// relative.
  static func scheme(ofReference reference: String) -> String? {
    let text = reference.drop { $0 == " " || $0 == "\t" }
    guard let colon = text.firstIndex(of: ":"), let first = text.first, first.isASCII, first.isLetter else {
      return nil
    }
    let scheme = text[..<colon]
    let valid = scheme.allSatisfy { character in
      character.isASCII && (character.isLetter || character.isNumber || "+-.".contains(character))
    }
    return valid ? scheme.lowercased() : nil
  }

  /// Decides about one hop.
  ///
  /// - Parameters:
  ///   - location: The raw `Location` of the 3xx response; its scheme is checked before
  ///     FoundationNetworking's rewriting can hide it.
  ///   - status: The 3xx status of the hop.
  ///   - current: The URL that answered with the 3xx, against which a relative `location`
  ///     is resolved.
  ///   - proposed: The request FoundationNetworking would send next; the hop keeps its method
  ///     and headers, with the target resolved here.
  ///   - original: The request as the client first sent it, whose body a hop may repeat.
  ///   - origin: The URL of the original request; sensitive headers go only to its origin.
  ///   - visited: The URLs requested so far in this exchange, the original included.
  ///   - policy: Whether to follow, and how far.
  ///   - sensitiveHeaders: The headers removed from a hop to another origin.
  /// - Returns: The request to follow, or why the hop is not followed.
  static func decide(
    location: String?, status: Int, from current: URL?, proposed: URLRequest, original: URLRequest,
    origin: URL, visited: [URL], policy: RedirectPolicy, sensitiveHeaders: HeaderNameSet
  ) -> Decision {
    guard case .follow = policy else { return .deliver }
    if let scheme = location.flatMap(scheme(ofReference:)), scheme != "http" && scheme != "https" {
      return .unsupportedScheme(scheme)
    }
    guard let target = resolve(location, against: current) ?? proposed.url else {
      return .unsupportedScheme("none")
    }
    let scheme = target.scheme?.lowercased() ?? ""
    guard scheme == "http" || scheme == "https" else { return .unsupportedScheme(scheme) }
    let limit = policy.maximumRedirects
    if visited.count > limit || visited.contains(where: { $0.absoluteString == target.absoluteString }) {
      return .tooManyRedirects(limit: limit)
    }
    var request = proposed
    request.url = target
    carryBody(of: original, into: &request, status: status)
    if !isSameOrigin(origin, target) {
      for name in (proposed.allHTTPHeaderFields ?? [:]).keys where sensitiveHeaders.contains(name) {
        request.setValue(nil, forHTTPHeaderField: name)
      }
    }
    return .follow(request)
  }

  /// Returns the absolute URL a `Location` refers to, resolved against `base` as RFC 3986 §5.2
  /// says; `nil` when either is missing or the result has no host.
  ///
  /// FoundationNetworking resolves a relative `Location` by replacing the path and the query of
  /// the current URL with the reference's: `?x=1` from `/redirect-to?url=…` became `/?x=1`
  /// instead of `/redirect-to?x=1` (measured on Swift 6.3.1 against httpbin).
  static func resolve(_ location: String?, against base: URL?) -> URL? {
    guard let location, let base else { return nil }
    let reference = location.trimmingCharacters(in: .whitespaces)
    guard let resolved = URL(string: reference, relativeTo: base)?.absoluteURL, resolved.host != nil else {
      return nil
    }
    return resolved
  }

  /// Whether `hop`, as `decide` made it, carries a body.
  ///
  /// FoundationNetworking sends such a hop with an empty body, whatever the request it is given
  /// (measured on Swift 6.3.1 against httpbin): the client follows it with a task of its own.
  static func repeatsBody(_ hop: URLRequest) -> Bool {
    hop.httpBody.map { !$0.isEmpty } ?? false
  }

  /// The header fields that describe a request's body, dropped with the body.
  static let bodyFields = [
    "Content-Type", "Content-Length", "Content-Encoding", "Content-Language", "Content-Location",
    "Content-Digest", "Repr-Digest", "Digest",
  ]

  /// Gives a hop that repeats the original method the original body, and takes the body and the
  /// fields that describe it off a hop that does not, and off every 303.
  ///
  /// RFC 9110 §15.4: a 307 or 308 repeats the request as it was, a 301 or 302 changes only a
  /// `POST` (to a `GET`), a 303 retrieves the other resource without content; a request turned
  /// into a `GET` loses its content and the fields that describe it. FoundationNetworking chooses the method that way but sends
  /// every hop without a body: a `PUT` of JSON followed a 307 as a `PUT` with `Content-Length: 0`,
  /// and a `POST` turned into a `GET` still carried its `Content-Type` (measured on Swift 6.3.1
  /// against httpbin).
  static func carryBody(of original: URLRequest, into hop: inout URLRequest, status: Int) {
    let originalMethod = (original.httpMethod ?? "GET").uppercased()
    let hopMethod = (hop.httpMethod ?? "GET").uppercased()
    if status != 303, hopMethod == originalMethod {
      hop.httpBody = original.httpBody
    } else {
      hop.httpBody = nil
      for name in bodyFields { hop.setValue(nil, forHTTPHeaderField: name) }
    }
  }
}
