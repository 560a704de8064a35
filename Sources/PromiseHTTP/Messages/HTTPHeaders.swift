/// Header fields with case-insensitive names, in order, whose credentials never show in descriptions.
///
/// Look a field up with `headers["content-type"]` in any case. `description`, `debugDescription`
/// and `dump` print the values of sensitive headers as `<redacted>`: those of the client's
/// `sensitiveHeaders` for the headers of a response it made, `HTTPClient.defaultSensitiveHeaders`
/// otherwise. A URL in any other value (`Location: /callback?code=…`) has the values of its
/// secret query parameters redacted (`HTTPClient.sensitiveQueryParameters`). The values
/// themselves are still there for code that reads them.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
  /// The fields, in order, with the names as they were given.
  public private(set) var fields: [(name: String, value: String)]
  /// The names whose values descriptions redact; `nil` for `HeaderNameSet.defaultSensitive`.
  ///
  /// A client sets its own on the responses it makes. Not part of equality.
  var sensitiveNames: HeaderNameSet?
  /// The query parameters redacted from URLs in values; `nil` for the default.
  ///
  /// Not part of equality.
  var sensitiveParameters: ParameterNameSet?

  /// Creates headers from fields, in order.
  public init(_ fields: [(name: String, value: String)] = []) {
    self.fields = fields
  }

  /// Creates headers from a dictionary, sorted by name (a dictionary has no stable order).
  public init(_ dictionary: [String: String]) {
    self.fields = dictionary.sorted { $0.key < $1.key }.map { (name: $0.key, value: $0.value) }
  }

  /// Creates headers from a dictionary literal, keeping the literal's order.
  public init(dictionaryLiteral elements: (String, String)...) {
    self.fields = elements.map { (name: $0.0, value: $0.1) }
  }

  /// The value of the first field named `name` (compared case-insensitively), or `nil`.
  ///
  /// Setting a value replaces every field with that name; setting `nil` removes them.
  public subscript(name: String) -> String? {
    get {
      let wanted = name.lowercased()
      return fields.first { $0.name.lowercased() == wanted }?.value
    }
    set {
      let wanted = name.lowercased()
      if let newValue {
        guard let index = fields.firstIndex(where: { $0.name.lowercased() == wanted }) else {
          fields.append((name: name, value: newValue))
          return
        }
        fields[index].value = newValue
        let rest = fields[(index + 1)...].filter { $0.name.lowercased() != wanted }
        fields = Array(fields[...index]) + rest
      } else {
        fields.removeAll { $0.name.lowercased() == wanted }
      }
    }
  }

  /// Every value of the fields named `name` (compared case-insensitively), in order.
  public func values(for name: String) -> [String] {
    let wanted = name.lowercased()
    return fields.filter { $0.name.lowercased() == wanted }.map(\.value)
  }

  /// Whether a field named `name` is present (compared case-insensitively).
  public func contains(_ name: String) -> Bool {
    self[name] != nil
  }

  /// Appends a field, keeping the fields already there.
  public mutating func add(name: String, value: String) {
    fields.append((name: name, value: value))
  }

  /// The number of fields.
  public var count: Int { fields.count }

  /// Iterates over the fields in order.
  public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
    fields.makeIterator()
  }

  /// Returns a copy whose credential values are replaced by `<redacted>`, as are the values of
  /// secret query parameters of the URLs in other values (`Location`, `Content-Location`, …).
  ///
  /// The credentials are the client's `sensitiveHeaders` and `sensitiveQueryParameters` for the
  /// headers of a response it made, `HTTPClient.defaultSensitiveHeaders` and
  /// `HTTPClient.defaultSensitiveQueryParameters` otherwise.
  public var redacted: HTTPHeaders {
    let names = sensitiveNames ?? .defaultSensitive
    let parameters = sensitiveParameters ?? .defaultSensitive
    var copy = HTTPHeaders(
      fields.map {
        (
          name: $0.name,
          value: Redaction.value($0.value, forHeader: $0.name, sensitive: names, parameters: parameters)
        )
      })
    copy.sensitiveNames = sensitiveNames
    copy.sensitiveParameters = sensitiveParameters
    return copy
  }

  /// Returns a copy whose descriptions redact the values of `names`, and the secret query
  /// parameters `parameters` (the default ones if `nil`) of URLs in other values.
  func redacting(_ names: HeaderNameSet, parameters: ParameterNameSet? = nil) -> HTTPHeaders {
    var copy = self
    copy.sensitiveNames = names
    copy.sensitiveParameters = parameters ?? sensitiveParameters
    return copy
  }

  /// Compares names case-insensitively and values exactly, in order.
  public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
    lhs.fields.count == rhs.fields.count
      && zip(lhs.fields, rhs.fields).allSatisfy {
        $0.name.lowercased() == $1.name.lowercased() && $0.value == $1.value
      }
  }
}

extension HTTPHeaders: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
  /// `[Name: value, …]` with credentials redacted.
  public var description: String {
    "[" + redacted.fields.map { "\($0.name): \($0.value)" }.joined(separator: ", ") + "]"
  }

  /// The same as `description`: credentials redacted.
  public var debugDescription: String { description }

  /// A mirror with credentials redacted, so `dump` shows no secret.
  public var customMirror: Mirror {
    Mirror(
      self, unlabeledChildren: redacted.fields.map { "\($0.name): \($0.value)" }, displayStyle: .collection)
  }
}
