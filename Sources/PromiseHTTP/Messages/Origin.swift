import Foundation

/// The origin of a URL (RFC 6454): its scheme, host and port, the unit credentials are kept to.
///
/// In Messages, below the policies, because building a request already needs it: the client's
/// sensitive default headers go to the base URL's origin only (`RequestBuilder`), as a
/// redirect's do (`Redirects`).
enum Origin {
  /// Whether `a` and `b` have the same scheme, host and port (default ports filled in).
  static func same(_ a: URL, _ b: URL) -> Bool {
    guard let schemeA = a.scheme?.lowercased(), let schemeB = b.scheme?.lowercased() else { return false }
    return schemeA == schemeB && a.host?.lowercased() == b.host?.lowercased()
      && (a.port ?? defaultPort(schemeA)) == (b.port ?? defaultPort(schemeB))
  }

  /// The port a scheme implies when a URL names none: 80 for `http`, 443 for `https`.
  static func defaultPort(_ scheme: String) -> Int? {
    switch scheme {
    case "http": 80
    case "https": 443
    default: nil
    }
  }
}
