/// Evaluates `Range` and `If-Range` (RFC 9110 §13.1.5, §14) for one representation.
enum ByteRange {
  /// What to send.
  enum Evaluation: Equatable {
    /// The whole representation, `200`.
    case full
    /// This part of it, `206`.
    case partial(Range<Int64>)
    /// Nothing: `416` with `Content-Range: bytes */length`.
    case unsatisfiable
  }

  /// Returns what to send for a `GET` with these `Range` and `If-Range` values.
  ///
  /// A false `If-Range`, a malformed range set, another unit or more than one range means the
  /// whole representation (a server may ignore any of these).
  static func evaluate(
    range: String?, ifRange: String?, length: Int64, etag: String?, lastModified: String?
  ) -> Evaluation {
    guard let range else { return .full }
    if let ifRange, !ifRangeHolds(ifRange, etag: etag, lastModified: lastModified) {
      return .full
    }
    let trimmed = trim(range)
    guard let equals = trimmed.firstIndex(of: "="),
      trim(String(trimmed[..<equals])).lowercased() == "bytes"
    else { return .full }
    let specs = trimmed[trimmed.index(after: equals)...].split(separator: ",").map { trim(String($0)) }
      .filter { !$0.isEmpty }
    guard specs.count == 1, let spec = specs.first, let dash = spec.firstIndex(of: "-") else {
      return .full
    }
    let first = String(spec[..<dash])
    let last = String(spec[spec.index(after: dash)...])
    if first.isEmpty {
      // Suffix range: the last N bytes.
      guard let suffix = number(last) else { return .full }
      guard suffix > 0, length > 0 else { return .unsatisfiable }
      return .partial(max(0, length - suffix)..<length)
    }
    guard let start = number(first) else { return .full }
    var end = length
    if !last.isEmpty {
      guard let lastByte = number(last), lastByte >= start else { return .full }
      end = min(length, lastByte == .max ? .max : lastByte + 1)
    }
    guard start < length else { return .unsatisfiable }
    return .partial(start..<end)
  }

  /// Returns whether an `If-Range` value matches: a strong entity tag equal to `etag` (itself
  /// strong), or a date equal to `lastModified`.
  static func ifRangeHolds(_ value: String, etag: String?, lastModified: String?) -> Bool {
    let value = trim(value)
    if value.hasPrefix("\"") || value.hasPrefix("W/") {
      guard let etag, !value.hasPrefix("W/"), !etag.hasPrefix("W/") else { return false }
      return value == trim(etag)
    }
    guard let lastModified else { return false }
    return value == trim(lastModified)
  }

  /// Returns the value of a run of ASCII digits (saturating at `Int64.max`), or `nil`.
  private static func number(_ text: String) -> Int64? {
    guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    var value: Int64 = 0
    for digit in text.utf8 {
      let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
      let (sum, overflow2) = times10.addingReportingOverflow(Int64(digit - 0x30))
      if overflow1 || overflow2 { return .max }
      value = sum
    }
    return value
  }

  private static func trim(_ text: String) -> String {
    var slice = Substring(text)
    while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
    while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
    return String(slice)
  }
}
