import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The redirect rules: which hops are followed and what a hop to another origin may carry.
///
/// FoundationNetworking on Linux follows redirects with every header of the original request,
/// `Authorization` included, whatever the target host (measured on Swift 6.3.1). The client
/// routes each hop through these rules instead.
enum Redirects {
  /// The headers that never follow a redirect to another scheme, host or port.
  static let credentialHeaders = ["Authorization", "Proxy-Authorization", "Cookie"]

  /// What to do with one redirect hop.
  enum Decision: Equatable {
    /// Follow the hop with this request (credentials removed when the origin changed).
    case follow(URLRequest)
    /// Refuse: the hop would exceed the limit or revisit a URL (a loop).
    case tooManyRedirects
    /// Refuse: the target is not `http` or `https`.
    case unsupportedScheme(String)
  }

  /// Whether `a` and `b` have the same scheme, host and port (default ports filled in).
  static func isSameOrigin(_ a: URL, _ b: URL) -> Bool {
    guard let schemeA = a.scheme?.lowercased(), let schemeB = b.scheme?.lowercased() else { return false }
    return schemeA == schemeB && a.host?.lowercased() == b.host?.lowercased()
      && (a.port ?? defaultPort(schemeA)) == (b.port ?? defaultPort(schemeB))
  }

  static func defaultPort(_ scheme: String) -> Int? {
    switch scheme {
    case "http": return 80
    case "https": return 443
    default: return nil
    }
  }

  /// Decides about one hop.
  ///
  /// - Parameters:
  ///   - proposed: The request FoundationNetworking would send next.
  ///   - origin: The URL of the original request; credentials go only to its origin.
  ///   - visited: The URLs requested so far in this exchange, the original included.
  ///   - limit: The most redirects allowed.
  /// - Returns: The request to follow, or why the hop is refused.
  static func decide(proposed: URLRequest, origin: URL, visited: [URL], limit: Int) -> Decision {
    guard let target = proposed.url else { return .unsupportedScheme("none") }
    let scheme = target.scheme?.lowercased() ?? ""
    guard scheme == "http" || scheme == "https" else { return .unsupportedScheme(scheme) }
    if visited.count > limit || visited.contains(where: { $0.absoluteString == target.absoluteString }) {
      return .tooManyRedirects
    }
    var request = proposed
    if !isSameOrigin(origin, target) {
      for name in credentialHeaders { request.setValue(nil, forHTTPHeaderField: name) }
    }
    return .follow(request)
  }
}
