import Foundation

/// Removes credentials from what PromiseHTTP shows: URLs, headers and error descriptions.
///
/// Every description, debug description and reflection (`dump`) of a PromiseHTTP value goes
/// through these rules, so a log line or a crash report never carries a secret.
enum Redaction {
  /// What a redacted value is replaced with.
  static let placeholder = "<redacted>"

  /// Header names whose values are credentials, lowercased.
  static let sensitiveHeaderNames: Set<String> = [
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key",
  ]

  /// Returns whether the value of the header `name` is a credential.
  static func isSensitive(headerName name: String) -> Bool {
    sensitiveHeaderNames.contains(name.lowercased())
  }

  /// Returns `value`, or the placeholder when the header `name` holds a credential.
  static func value(_ value: String, forHeader name: String) -> String {
    isSensitive(headerName: name) ? placeholder : value
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
