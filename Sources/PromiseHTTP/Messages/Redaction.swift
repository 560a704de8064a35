import Foundation

/// Removes credentials from what PromiseHTTP shows: URLs, headers, body excerpts and error
/// descriptions.
///
/// Every description, debug description and reflection (`dump`) of a PromiseHTTP value goes
/// through these rules, so a log line or a crash report never carries a secret. Which header
/// values are secret is one list, `HTTPClient.sensitiveHeaders`: the same names are redacted
/// here and removed from a redirect to another origin (`Redirects`). Which query parameters,
/// JSON members and form fields are secret is another, `HTTPClient.sensitiveQueryParameters`
/// (`ParameterNameSet`).
enum Redaction {
  /// What a redacted value is replaced with.
  static let placeholder = "<redacted>"

  /// The placeholder percent-encoded, as a URL holds it.
  ///
  /// What the URL of an `HTTPError` carries in place of a secret query value; shown as
  /// `placeholder` in text.
  static let encodedPlaceholder = "%3Credacted%3E"

  /// The credential headers of the public contract: sensitive whatever a client is given.
  static let alwaysSensitive = ["Authorization", "Proxy-Authorization", "Cookie"]

  /// Returns `value`, or the placeholder when `names` holds the header `name`; the secret query
  /// parameters of a URL in any other value are redacted.
  static func value(
    _ value: String, forHeader name: String, sensitive names: HeaderNameSet,
    parameters: ParameterNameSet = .defaultSensitive
  ) -> String {
    if names.contains(name) { return placeholder }
    if urlValuedHeaders.contains(name.lowercased()) { return reference(value, parameters: parameters) }
    guard value.contains("://") else { return value }
    return value.replacing(/[A-Za-z][A-Za-z0-9+.\-]*:\/\/[^\s'"<>,;]+/) { match in
      reference(String(match.output), parameters: parameters)
    }
  }

  /// The headers whose whole value is a URL reference, possibly relative (`/callback?code=…`).
  static let urlValuedHeaders: Set<String> = ["location", "content-location", "referer"]

  /// Returns `url` without its user-info (`user:password@`).
  static func url(_ url: URL) -> URL {
    guard url.user != nil || url.password != nil,
      var components = URLComponents(url: url, resolvingAgainstBaseURL: true)
    else { return url }
    components.user = nil
    components.password = nil
    return components.url ?? url
  }

  /// Returns `url` without its user-info and with the values of its secret query parameters
  /// (and of a fragment written as a query, `#access_token=…`) replaced by `encodedPlaceholder`:
  /// a URL that carries no credential, for an `HTTPError` to keep.
  static func url(_ url: URL, redacting parameters: ParameterNameSet) -> URL {
    let text = reference(url.absoluteString, parameters: parameters, placeholder: encodedPlaceholder)
    if text == url.absoluteString { return self.url(url) }
    if let redacted = URL(string: text) { return redacted }
    // Not expected: only values were replaced, by a valid escape. Keep no query at all.
    guard var components = URLComponents(url: self.url(url), resolvingAgainstBaseURL: true) else {
      return url
    }
    components.percentEncodedQuery = nil
    components.percentEncodedFragment = nil
    return components.url ?? url
  }

  /// Returns `url` as text, without its user-info and with the values of its secret query
  /// parameters replaced by the placeholder; `"<no URL>"` for `nil`.
  static func text(_ url: URL?, parameters: ParameterNameSet = .defaultSensitive) -> String {
    guard let url else { return "<no URL>" }
    return reference(url.absoluteString, parameters: parameters)
  }

  /// Returns the URL reference `text` (absolute or relative) without user-info and with the
  /// values of its secret query parameters, and of a fragment written as a query, replaced by
  /// `placeholder`.
  ///
  /// Works on the text, so that it also redacts what `URL` would not parse. A value already
  /// redacted (`encodedPlaceholder`) is shown as `placeholder` too.
  static func reference(
    _ text: String, parameters: ParameterNameSet, placeholder: String = Redaction.placeholder
  ) -> String {
    var rest = Substring(text)
    var fragment: Substring?
    if let hash = rest.firstIndex(of: "#") {
      fragment = rest[rest.index(after: hash)...]
      rest = rest[..<hash]
    }
    var query: Substring?
    if let question = rest.firstIndex(of: "?") {
      query = rest[rest.index(after: question)...]
      rest = rest[..<question]
    }
    var result = withoutUserInfo(rest)
    if let query { result += "?" + redactedPairs(query, parameters: parameters, placeholder: placeholder) }
    if let fragment {
      result +=
        "#"
        + (fragment.contains("=")
          ? redactedPairs(fragment, parameters: parameters, placeholder: placeholder) : String(fragment))
    }
    return result
  }

  /// Returns `text` (up to any query) without the user-info of its authority.
  private static func withoutUserInfo(_ text: Substring) -> String {
    guard let scheme = text.range(of: "://") else { return String(text) }
    let authorityEnd = text[scheme.upperBound...].firstIndex(of: "/") ?? text.endIndex
    guard let at = text[scheme.upperBound..<authorityEnd].lastIndex(of: "@") else { return String(text) }
    return String(text[..<scheme.upperBound] + text[text.index(after: at)...])
  }

  /// Returns `name=value` pairs separated by `&` with the values of secret names (percent- or
  /// `+`-encoded as in a query or a form body) replaced by `placeholder`.
  static func redactedPairs(_ text: Substring, parameters: ParameterNameSet, placeholder: String) -> String {
    text.split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
      guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
      let value = pair[pair.index(after: equals)...]
      let rawName = pair[..<equals]
      let name = rawName.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(rawName)
      let redacted = parameters.contains(name) || value.lowercased() == encodedPlaceholder.lowercased()
      return redacted ? "\(rawName)=\(placeholder)" : String(pair)
    }.joined(separator: "&")
  }

  /// Returns up to `limit` bytes of `body` as text, with the values of secret JSON members and
  /// form fields replaced by the placeholder, and `…` when it was cut.
  ///
  /// Only the excerpt is examined, never the whole body: a JSON member whose key matches
  /// `parameters` has its string or number value replaced (a string cut by the excerpt's end
  /// too); a body that is a form (`contentType` is `application/x-www-form-urlencoded`, or the
  /// text is `name=value&…` without spaces) has the values of its secret fields replaced. The
  /// result is at most `limit` characters plus `…`.
  static func excerpt(
    of body: Data, contentType: String?, limit: Int, parameters: ParameterNameSet
  ) -> String {
    let text = String(decoding: body.prefix(limit), as: UTF8.self)
    return bounded(
      redactedBodyText(text, contentType: contentType, parameters: parameters), limit: limit,
      cut: body.count > limit)
  }

  /// Returns an excerpt already made (by `excerpt(of:…)` or by hand) redacted again by
  /// `parameters` and bounded to `limit` characters: what a description shows of it.
  static func excerpt(_ text: String, limit: Int, parameters: ParameterNameSet = .defaultSensitive) -> String
  {
    var body = Substring(text)
    let wasCut = body.hasSuffix("…")
    if wasCut { body = body.dropLast() }
    let redacted = redactedBodyText(String(body), contentType: nil, parameters: parameters)
    return bounded(redacted, limit: limit, cut: wasCut)
  }

  private static func bounded(_ text: String, limit: Int, cut: Bool) -> String {
    guard text.count > limit else { return cut ? text + "…" : text }
    return String(text.prefix(limit)) + "…"
  }

  /// `text` with secret JSON member values and, for a form, secret field values redacted.
  private static func redactedBodyText(_ text: String, contentType: String?, parameters: ParameterNameSet)
    -> String
  {
    var text = text
    if text.contains("\"") { text = redactedJSONMembers(text, parameters: parameters) }
    let isForm =
      contentType.map { $0.lowercased().hasPrefix("application/x-www-form-urlencoded") }
      ?? false
    if isForm || looksLikeForm(text) {
      text = redactedPairs(Substring(text), parameters: parameters, placeholder: placeholder)
    }
    return text
  }

  /// Whether `text` reads as a form body: `name=value` pairs joined by `&`, no white space.
  private static func looksLikeForm(_ text: String) -> Bool {
    guard let first = text.first, first != "{", first != "[", first != "<", text.contains("=") else {
      return false
    }
    return !text.contains { $0.isWhitespace }
  }

  /// `text` (JSON, possibly cut short) with the string or number value of every member whose
  /// key is in `parameters` replaced by `"<redacted>"`.
  private static func redactedJSONMembers(_ text: String, parameters: ParameterNameSet) -> String {
    text.replacing(
      /"((?:[^"\\]|\\.)*)"(\s*:\s*)("(?:[^"\\]|\\.)*(?:"|$)|-?[0-9][0-9.eE+\-]*)/
    ) { match in
      let (whole, key, colon, _) = match.output
      guard parameters.contains(String(key)) else { return String(whole) }
      return "\"\(key)\"\(colon)\"\(placeholder)\""
    }
  }
}

/// A set of query-parameter, JSON-member and form-field names that hold secrets, compared
/// case-insensitively and word by word: `HTTPClient.sensitiveQueryParameters`.
///
/// A name is in the set when it is one of the names (`access_token`, `Token`), or when one of
/// its words is: words are split at `-`, `_`, `.` and other punctuation and where a lower-case
/// letter meets an upper-case one, so `X-Amz-Signature`, `oauth_token`, `accessToken` and
/// `session.id` match `signature`, `token`, `token` and `session`.
@usableFromInline
struct ParameterNameSet: Sendable, Hashable {
  /// The names, lowercased.
  private let lowercased: Set<String>

  /// Creates a set of `names`.
  init(_ names: some Sequence<String>) {
    lowercased = Set(names.map { $0.lowercased() })
  }

  /// The default of `HTTPClient.Configuration.sensitiveQueryParameters` and `HTTPLogger`'s
  /// (`HTTPClient.defaultSensitiveQueryParameters`, where its rationale is).
  @usableFromInline
  static let defaultNames: Set<String> = [
    "access_token", "refresh_token", "id_token", "token", "api_key", "apikey", "key", "password", "passwd",
    "pwd", "secret", "client_secret", "signature", "sig", "code", "session", "auth", "authorization",
    "credential", "credentials", "jwt", "assertion",
  ]

  /// `defaultNames`: what a value not made by a client is redacted by.
  static let defaultSensitive = ParameterNameSet(defaultNames)

  /// Returns whether `name`, or one of its words, is in the set, in any case.
  func contains(_ name: String) -> Bool {
    if lowercased.isEmpty { return false }
    if lowercased.contains(name.lowercased()) { return true }
    return Self.words(of: name).contains { lowercased.contains($0) }
  }

  /// The words of `name`, lowercased: split at every character that is not a letter or a
  /// digit, and before an upper-case letter that follows a lower-case one.
  static func words(of name: String) -> [String] {
    var words: [String] = []
    var current = ""
    var previousIsLower = false
    for character in name {
      guard character.isLetter || character.isNumber else {
        if !current.isEmpty { words.append(current) }
        current = ""
        previousIsLower = false
        continue
      }
      if character.isUppercase, previousIsLower, !current.isEmpty {
        words.append(current)
        current = ""
      }
      current += character.lowercased()
      previousIsLower = character.isLowercase
    }
    if !current.isEmpty { words.append(current) }
    return words
  }
}

/// A set of header names compared case-insensitively: the sensitive headers of a client.
@usableFromInline
struct HeaderNameSet: Sendable, Hashable {
  /// The names, lowercased.
  private let lowercased: Set<String>

  /// Creates a set of `names` plus `Redaction.alwaysSensitive`.
  init(sensitive names: some Sequence<String>) {
    lowercased = Set(names.map { $0.lowercased() } + Redaction.alwaysSensitive.map { $0.lowercased() })
  }

  /// The default of `HTTPClient.Configuration.sensitiveHeaders` and `HTTPLogger`'s
  /// (`HTTPClient.defaultSensitiveHeaders`, where its rationale is).
  @usableFromInline
  static let defaultNames: Set<String> = [
    "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key",
  ]

  /// `defaultNames`: what a value not made by a client is redacted by.
  static let defaultSensitive = HeaderNameSet(sensitive: defaultNames)

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
