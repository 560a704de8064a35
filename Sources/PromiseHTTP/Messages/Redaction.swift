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
  /// redacted (`encodedPlaceholder`) is shown as `placeholder` too, and a URL in a value
  /// (`next=https%3A%2F%2F…%3Ftoken%3D…`) is redacted in turn. `open` says that `text` was cut
  /// at its end: an authority cut before its end may be a password cut short
  /// (`https://user:pa`), and is replaced by `placeholder` when it holds a `:` or an `@`.
  static func reference(
    _ text: String, parameters: ParameterNameSet, placeholder: String = Redaction.placeholder,
    open: Bool = false, depth: Int = 0
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
    var result = withoutUserInfo(
      rest, open: open && query == nil && fragment == nil, placeholder: placeholder)
    if let query {
      result +=
        "?"
        + redactedPairs(
          query, parameters: parameters, placeholder: placeholder, open: open && fragment == nil, depth: depth
        )
    }
    if let fragment {
      result +=
        "#"
        + (fragment.contains("=")
          ? redactedPairs(
            fragment, parameters: parameters, placeholder: placeholder, open: open, depth: depth)
          : String(fragment))
    }
    return result
  }

  /// Returns `text` (up to any query) without the user-info of its authority; with its
  /// authority replaced by `placeholder` when `open` (cut at its end) and the authority, cut
  /// too, holds a `:` (a password may follow the name).
  private static func withoutUserInfo(_ text: Substring, open: Bool, placeholder: String) -> String {
    guard let scheme = text.range(of: "://") else { return String(text) }
    let authorityEnd = text[scheme.upperBound...].firstIndex(of: "/") ?? text.endIndex
    let authority = text[scheme.upperBound..<authorityEnd]
    guard let at = authority.lastIndex(of: "@") else {
      if open, authorityEnd == text.endIndex, authority.contains(":") {
        return String(text[..<scheme.upperBound]) + placeholder
      }
      return String(text)
    }
    return String(text[..<scheme.upperBound] + text[text.index(after: at)...])
  }

  /// Returns `name=value` pairs separated by `&` with the values of secret names (percent- or
  /// `+`-encoded as in a query or a form body) replaced by `placeholder`, and the URLs in the
  /// other values (`redirect_uri=https%3A%2F%2F…`) redacted.
  ///
  /// `open` says that `text` was cut at its end, in its last value maybe.
  static func redactedPairs(
    _ text: Substring, parameters: ParameterNameSet, placeholder: String, open: Bool = false, depth: Int = 0
  ) -> String {
    let pairs = text.split(separator: "&", omittingEmptySubsequences: false)
    return pairs.enumerated().map { index, pair -> String in
      guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
      let value = pair[pair.index(after: equals)...]
      let rawName = pair[..<equals]
      let name = rawName.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(rawName)
      let redacted = parameters.contains(name) || value.lowercased() == encodedPlaceholder.lowercased()
      if redacted { return "\(rawName)=\(placeholder)" }
      guard depth < maximumNesting, value.contains(":") || value.contains("%") else { return String(pair) }
      let urls = redactedURLs(
        in: String(value), parameters: parameters, placeholder: placeholder,
        open: open && index == pairs.count - 1, depth: depth + 1)
      return "\(rawName)=\(urls)"
    }.joined(separator: "&")
  }

  /// How many URLs deep, one in the query of another, `redactedPairs` looks.
  private static let maximumNesting = 4

  /// Returns `text` with every absolute URL in it (`scheme://…`) redacted as `reference` does:
  /// also one written as a JSON string escapes it (`http:\/\/host\/get?a=1\u0026token=…`) and
  /// one percent-encoded as a query or form value (`https%3A%2F%2Fhost%2F%3Ftoken%3D…`).
  ///
  /// A URL with nothing to redact is left as it was written; a JSON-escaped one that is
  /// redacted is written back with its `/` unescaped, a percent-encoded one encoded again.
  /// `open` says that `text` was cut at its end, perhaps inside its last URL (see `reference`).
  static func redactedURLs(
    in text: String, parameters: ParameterNameSet, placeholder: String = Redaction.placeholder,
    open: Bool = false, depth: Int = 0
  ) -> String {
    guard
      text.contains(":/") || text.contains(":\\/")
        || text.range(of: "%3a%2f%2f", options: .caseInsensitive) != nil
    else {
      return text
    }
    // The scheme, then `://` (plain or JSON-escaped) and the characters of a URL, where a JSON
    // escape counts as one (but not `\"`, which ends the string); or `%3A%2F%2F` and the
    // characters percent-encoding leaves alone.
    let pattern =
      /[A-Za-z][A-Za-z0-9+.\-]*(?:(?::\/\/|:\\\/\\\/)(?:[^\s'"<>\\]|\\[^"\s])*|%3[Aa]%2[Ff]%2[Ff][A-Za-z0-9%._~+\-]*)/
    return text.replacing(pattern) { match in
      let raw = String(match.output)
      // Cut at the end of `text`, or before the end of an escape that `pattern` left out.
      let rest = text[match.range.upperBound...]
      let cut = open && (rest.isEmpty || (rest.first == "\\" && rest.count <= 5))
      let afterScheme = raw.first { !($0.isLetter || $0.isNumber || "+.-".contains($0)) }
      if afterScheme == "%" {
        let decoded = percentDecoded(raw)
        let redacted = reference(
          decoded, parameters: parameters, placeholder: Redaction.placeholder, open: cut, depth: depth + 1)
        return redacted == decoded ? raw : percentEncoded(redacted)
      }
      guard raw.contains("\\") else {
        return reference(raw, parameters: parameters, placeholder: placeholder, open: cut, depth: depth)
      }
      let unescaped = jsonUnescaped(raw)
      let redacted = reference(
        unescaped, parameters: parameters, placeholder: placeholder, open: cut, depth: depth)
      return redacted == unescaped ? raw : jsonEscaped(redacted)
    }
  }

  /// `text` with its `%XX` escapes decoded; an incomplete or invalid escape (a text cut short)
  /// stays as it is, and bytes that are not UTF-8 become U+FFFD.
  static func percentDecoded(_ text: String) -> String {
    let utf8 = Array(text.utf8)
    var bytes: [UInt8] = []
    bytes.reserveCapacity(utf8.count)
    var index = 0
    while index < utf8.count {
      if utf8[index] == UInt8(ascii: "%"), index + 2 < utf8.count,
        let high = hexValue(utf8[index + 1]), let low = hexValue(utf8[index + 2])
      {
        bytes.append(high << 4 | low)
        index += 3
      } else {
        bytes.append(utf8[index])
        index += 1
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// `text` with every byte but letters, digits and `-._~+` percent-encoded.
  private static func percentEncoded(_ text: String) -> String {
    var result = ""
    for byte in text.utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
        UInt8(ascii: "~"), UInt8(ascii: "+"):
        result.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        result +=
          "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
      }
    }
    return result
  }

  private static func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
  }

  /// The text of the JSON string contents `text`, escapes decoded; an incomplete escape (a
  /// text cut short) stays as it is.
  static func jsonUnescaped(_ text: String) -> String {
    var result = String.UnicodeScalarView()
    var scalars = Substring(text).unicodeScalars[...]
    while let scalar = scalars.popFirst() {
      guard scalar == "\\", let escaped = scalars.first else {
        result.append(scalar)
        continue
      }
      switch escaped {
      case "u":
        let hex = String(String.UnicodeScalarView(scalars.dropFirst().prefix(4)))
        guard hex.count == 4, let code = UInt32(hex, radix: 16) else {
          result.append(scalar)
          continue
        }
        result.append(Unicode.Scalar(code) ?? "\u{FFFD}")
        scalars = scalars.dropFirst(5)
      default:
        result.append(jsonEscapes[escaped] ?? escaped)
        scalars.removeFirst()
      }
    }
    return String(result)
  }

  /// What the one-letter escapes of a JSON string stand for (`\"`, `\\`, `\/` for themselves).
  private static let jsonEscapes: [Unicode.Scalar: Unicode.Scalar] = [
    "b": "\u{8}", "f": "\u{C}", "n": "\n", "r": "\r", "t": "\t",
  ]

  /// `text` as the contents of a JSON string: `"`, `\` and control characters escaped.
  private static func jsonEscaped(_ text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": result += "\\\""
      case "\\": result += "\\\\"
      case _ where scalar.value < 0x20:
        result += "\\u00" + String(scalar.value >> 4, radix: 16) + String(scalar.value & 0xF, radix: 16)
      default: result.unicodeScalars.append(scalar)
      }
    }
    return result
  }

  /// Returns up to `limit` characters of `body` as text, with the values of secret JSON members
  /// and form fields, and the secrets of the URLs it quotes, replaced by the placeholder, and `…`
  /// when it was cut.
  ///
  /// Only the start of the body is examined, never the whole body: its first
  /// `excerptWindow(limit)` bytes are redacted, then cut to `limit` characters, so that a secret
  /// the cut falls in is redacted whole. A JSON member whose key matches `parameters` has its
  /// string or number value replaced (a string cut by the window's end too); a body that is a
  /// form (`contentType` is `application/x-www-form-urlencoded`, or the text is `name=value&…`
  /// without spaces) has the values of its secret fields replaced; every absolute URL
  /// (`https://…`, JSON-escaped `https:\/\/…`, percent-encoded `https%3A%2F%2F…`) loses its
  /// user-info and the values of its secret query parameters (`redactedURLs`). The result is at
  /// most `limit` characters plus `…`.
  static func excerpt(
    of body: Data, contentType: String?, limit: Int, parameters: ParameterNameSet
  ) -> String {
    let window = excerptWindow(limit)
    let text = String(decoding: body.prefix(window), as: UTF8.self)
    let open = body.count > window
    return bounded(
      redactedBodyText(text, contentType: contentType, parameters: parameters, open: open), limit: limit,
      cut: open)
  }

  /// How many bytes of a body an excerpt of `limit` characters is redacted from: four times as
  /// many, so that what redaction shortens (a long token become `<redacted>`) is made up for,
  /// and a secret the excerpt's end falls in is seen whole.
  static func excerptWindow(_ limit: Int) -> Int {
    let (window, overflow) = max(0, limit).multipliedReportingOverflow(by: 4)
    return overflow ? Int.max : window
  }

  /// Returns an excerpt already made (by `excerpt(of:…)` or by hand) redacted again by
  /// `parameters` and bounded to `limit` characters: what a description shows of it.
  static func excerpt(_ text: String, limit: Int, parameters: ParameterNameSet = .defaultSensitive) -> String
  {
    var body = Substring(text)
    let wasCut = body.hasSuffix("…")
    if wasCut { body = body.dropLast() }
    let redacted = redactedBodyText(String(body), contentType: nil, parameters: parameters, open: wasCut)
    return bounded(redacted, limit: limit, cut: wasCut)
  }

  private static func bounded(_ text: String, limit: Int, cut: Bool) -> String {
    guard text.count > limit else { return cut ? text + "…" : text }
    return String(text.prefix(limit)) + "…"
  }

  /// `text` with secret JSON member values, the secrets of its URLs and, for a form, secret
  /// field values redacted; `open` when `text` was cut at its end.
  private static func redactedBodyText(
    _ text: String, contentType: String?, parameters: ParameterNameSet, open: Bool
  ) -> String {
    var text = text
    if text.contains("\"") { text = redactedJSONMembers(text, parameters: parameters) }
    text = redactedURLs(in: text, parameters: parameters, open: open)
    let isForm =
      contentType.map { $0.lowercased().hasPrefix("application/x-www-form-urlencoded") }
      ?? false
    if isForm || looksLikeForm(text) {
      text = redactedPairs(Substring(text), parameters: parameters, placeholder: placeholder, open: open)
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
