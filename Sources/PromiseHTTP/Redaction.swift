import Foundation

/// Removes credentials from what PromiseHTTP shows: URLs, headers and error descriptions.
///
/// Every description, debug description and reflection (`dump`) of a PromiseHTTP value goes
/// through these rules, so a log line or a crash report never carries a secret. Which header
/// values are secret is one list, `HTTPClient.sensitiveHeaders`: the same names are redacted
/// here and removed from a redirect to another origin (`Redirects`).
enum Redaction {
  /// What a redacted value is replaced with.
  static let placeholder = "<redacted>"

  /// The credential headers of the public contract: sensitive whatever a client is given.
  static let alwaysSensitive = ["Authorization", "Proxy-Authorization", "Cookie"]

  /// Returns `value`, or the placeholder when `names` holds the header `name`.
  static func value(_ value: String, forHeader name: String, sensitive names: HeaderNameSet) -> String {
    names.contains(name) ? placeholder : value
  }

  /// Returns `url` without its user-info (`user:password@`).
  static func url(_ url: URL) -> URL {
    guard url.user != nil || url.password != nil,
      var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
    else { return url }
    components.user = nil
    components.password = nil
    return components.url ?? url
  }

  /// Returns `url` without its user-info, as text; `"<no URL>"` for `nil`.
  static func text(_ url: URL?) -> String {
    guard let url else { return "<no URL>" }
    return self.url(url).absoluteString
  }
}

/// A set of header names compared case-insensitively: the sensitive headers of a client.
struct HeaderNameSet: Sendable, Hashable {
  /// The names, lowercased.
  private let lowercased: Set<String>

  /// Creates a set of `names` plus `Redaction.alwaysSensitive`.
  init(sensitive names: some Sequence<String>) {
    lowercased = Set(names.map { $0.lowercased() } + Redaction.alwaysSensitive.map { $0.lowercased() })
  }

  /// `HTTPClient.defaultSensitiveHeaders`: what a value not made by a client is redacted by.
  static let defaultSensitive = HeaderNameSet(sensitive: HTTPClient.defaultSensitiveHeaders)

  /// Returns whether `name` is in the set, in any case.
  func contains(_ name: String) -> Bool {
    lowercased.contains(name.lowercased())
  }

  /// Returns `names` with the names of `Redaction.alwaysSensitive` it lacks (in any case) added.
  static func withAlwaysSensitive(_ names: Set<String>) -> Set<String> {
    let given = Set(names.map { $0.lowercased() })
    return names.union(Redaction.alwaysSensitive.filter { !given.contains($0.lowercased()) })
  }
}
