import Foundation
import Promises

extension Promise where Value == HTTPResponse {
  /// Returns a promise of the response body decoded from JSON as `type`.
  ///
  /// Decoding runs on `queue`. Bad JSON, a missing key or a wrong type rejects with
  /// `HTTPError.decoding`, which names the type, the coding path (`items[2].id`), the URL and
  /// a bounded excerpt of the body; a rejected response passes its error on unchanged.
  ///
  /// - Parameters:
  ///   - queue: Where decoding runs; `DispatchQueue.promises` by default.
  ///   - type: The type to decode, for example `Token.self`.
  ///   - decoder: The decoder; a plain `JSONDecoder()` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the decoded value.
  public func decode<T: Decodable & Sendable>(
    on queue: DispatchQueue = .promises, _ type: T.Type, decoder: JSONDecoder = JSONDecoder(),
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<T> {
    let box = DecoderBox(decoder)
    return map(on: queue, file: file, line: line) { response in
      do {
        return try box.decoder.decode(T.self, from: response.body)
      } catch let error as DecodingError {
        throw HTTPError.decoding(error, type: T.self, response: response)
      } catch {
        throw HTTPError.decoding(
          type: "\(T.self)", codingPath: "", detail: response.redactedDetail("\(error)"),
          bodyExcerpt: response.bodyExcerpt(), url: response.redactedURL)
      }
    }
  }

  /// Returns a promise of the response body as text, decoded as UTF-8.
  ///
  /// Invalid UTF-8 rejects with `HTTPError.decoding` (type `String`); an empty body is `""`.
  ///
  /// - Parameters:
  ///   - queue: Where decoding runs; `DispatchQueue.promises` by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the text.
  public func text(
    on queue: DispatchQueue = .promises, file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<String> {
    map(on: queue, file: file, line: line) { response in
      guard let text = String(validating: response.body, as: UTF8.self) else {
        throw HTTPError.decoding(
          type: "String", codingPath: "", detail: "the body is not valid UTF-8",
          bodyExcerpt: response.bodyExcerpt(), url: response.redactedURL)
      }
      return text
    }
  }
}

extension HTTPResponse {
  /// `detail`, the text of a decoding error (which a type's own `init(from:)` may fill with
  /// what it read), with the secrets of the URLs it quotes redacted.
  fileprivate func redactedDetail(_ detail: String) -> String {
    Redaction.redactedURLs(in: detail, parameters: sensitiveParameters ?? .defaultSensitive)
  }
}

/// Carries a `JSONDecoder` into a `@Sendable` closure.
///
/// Safety of `@unchecked Sendable`: the decoder is used by one closure run at a time and
/// `decode` does not mutate its configuration.
private final class DecoderBox: @unchecked Sendable {
  let decoder: JSONDecoder
  init(_ decoder: JSONDecoder) { self.decoder = decoder }
}

extension HTTPError {
  /// Returns a decoding error that names `type`, the coding path and the URL of `response`.
  static func decoding<T>(_ error: DecodingError, type: T.Type, response: HTTPResponse) -> HTTPError {
    let context: DecodingError.Context?
    let detail: String
    switch error {
    case .typeMismatch(let expected, let c):
      context = c
      detail = "expected \(expected): \(c.debugDescription)"
    case .valueNotFound(let expected, let c):
      context = c
      detail = "no value for \(expected): \(c.debugDescription)"
    case .keyNotFound(let key, let c):
      context = DecodingError.Context(codingPath: c.codingPath + [key], debugDescription: c.debugDescription)
      detail = "missing key '\(key.stringValue)'"
    case .dataCorrupted(let c):
      context = c
      detail = "invalid JSON: \(c.debugDescription)"
    @unknown default:
      context = nil
      detail = "\(error)"
    }
    return .decoding(
      type: "\(T.self)", codingPath: codingPathText(context?.codingPath ?? []),
      detail: response.redactedDetail(detail),
      bodyExcerpt: response.bodyExcerpt(), url: response.redactedURL)
  }

  /// `items[2].id` style text for a coding path.
  static func codingPathText(_ path: [any CodingKey]) -> String {
    var text = ""
    for key in path {
      if let index = key.intValue {
        text += "[\(index)]"
      } else {
        text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
      }
    }
    return text
  }
}
