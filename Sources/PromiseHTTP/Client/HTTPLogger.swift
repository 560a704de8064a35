import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A step that writes one line per event of every request, with credentials redacted.
///
/// Add it to `HTTPClient.Configuration.interceptors`; give it what to do with a line
/// (`print`, your logger). The values of `sensitiveHeaders` and of the query parameters in
/// `sensitiveQueryParameters` are written as `<redacted>` and URLs lose their user-info, so a
/// log never carries a secret the client knows of. Lines:
/// ```
/// → GET http://127.0.0.1:8080/stream/config (attempt 1) Authorization: <redacted>
/// ← 503 http://127.0.0.1:8080/stream/config (attempt 1), 0 bytes
/// ↻ attempt 2 in 0.25 seconds
/// ✓ 200 http://127.0.0.1:8080/stream/config, 89 bytes
/// ```
/// `log` runs on the client's `callbackQueue` and must not block it.
public struct HTTPLogger: HTTPInterceptor {
  /// The headers whose values are redacted; `HTTPClient.defaultSensitiveHeaders` by default.
  public let sensitiveHeaders: Set<String>
  /// The query parameters whose values are redacted from URLs;
  /// `HTTPClient.defaultSensitiveQueryParameters` by default.
  public let sensitiveQueryParameters: Set<String>
  private let names: HeaderNameSet
  private let parameters: ParameterNameSet
  private let log: @Sendable (String) -> Void

  /// Creates a logger that hands each line to `log`.
  ///
  /// - Parameters:
  ///   - sensitiveHeaders: The headers whose values are written as `<redacted>`; `Authorization`,
  ///     `Proxy-Authorization` and `Cookie` always are.
  ///   - sensitiveQueryParameters: The query parameters whose values are written as `<redacted>`
  ///     (names match case-insensitively and word by word, as in `HTTPClient`).
  ///   - log: Receives each line, on the client's `callbackQueue`.
  public init(
    sensitiveHeaders: Set<String> = HeaderNameSet.defaultNames,
    sensitiveQueryParameters: Set<String> = ParameterNameSet.defaultNames,
    log: @escaping @Sendable (String) -> Void
  ) {
    self.sensitiveHeaders = sensitiveHeaders
    self.sensitiveQueryParameters = sensitiveQueryParameters
    self.names = HeaderNameSet(sensitive: sensitiveHeaders)
    self.parameters = ParameterNameSet(sensitiveQueryParameters)
    self.log = log
  }

  /// Writes the line for `event`.
  public func observe(_ event: HTTPEvent) {
    log(line(for: event))
  }

  /// The line for `event`, redacted.
  func line(for event: HTTPEvent) -> String {
    switch event {
    case .willSend(let request, let attempt):
      let fields = (request.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map {
        "\($0.key): \(Redaction.value($0.value, forHeader: $0.key, sensitive: names, parameters: parameters))"
      }
      let method = request.httpMethod ?? "GET"
      let head =
        "→ \(method) \(Redaction.text(request.url, parameters: parameters)) (attempt \(attempt.number))"
      return fields.isEmpty ? head : "\(head) \(fields.joined(separator: ", "))"
    case .didReceive(let response, let attempt):
      return
        "← \(response.statusCode) \(Redaction.text(response.url, parameters: parameters)) (attempt \(attempt.number)), \(response.body.count) bytes"
    case .didFail(let error, let attempt):
      return "✕ attempt \(attempt.number): \(error)"
    case .willRetry(let delay, let attempt):
      return "↻ attempt \(attempt.number + 1) in \(delay)"
    case .didFinish(.success(let response)):
      return
        "✓ \(response.statusCode) \(Redaction.text(response.url, parameters: parameters)), \(response.body.count) bytes"
    case .didFinish(.failure(let error)):
      return "✕ \(error)"
    }
  }
}
