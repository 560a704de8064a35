import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Turns the error a `URLSessionTask` failed with into the `URLError` of `HTTPError.transport`.
///
/// FoundationNetworking (libcurl) reports every TLS failure as `URLError(.unknown)` (-1), with
/// libcurl's message as its only detail: "SSL certificate problem: self-signed certificate",
/// "SSL: no alternative certificate subject name matches target host name '127.0.0.1'". The
/// message is kept, with the credentials of any URL in it removed, and the code is refined from
/// it, so that a certificate problem matches `.serverCertificateUntrusted` as on Darwin, and is not
/// retried (`RetryPolicy.defaultRetryableErrorCodes` holds no TLS code).
enum TransportFailure {
  /// Returns `error` rebuilt from what is safe to keep: its code (refined), its message
  /// (redacted, bounded), the redacted URL, and an underlying error with the original code.
  static func urlError(from error: URLError, url: URL?) -> URLError {
    let clean = url.map(Redaction.url)
    var message = self.message(of: error).map { Redaction.message($0, limit: HTTPError.excerptLimit) }
    if let text = message, let explanation = malformedResponse(text, code: error.code)?.explanation {
      message = text + explanation
    }
    var info: [String: Any] = [:]
    if let clean { info[NSURLErrorFailingURLErrorKey] = clean }
    if let message {
      info[NSLocalizedDescriptionKey] = message
      info[NSUnderlyingErrorKey] = NSError(
        domain: NSURLErrorDomain, code: error.errorCode, userInfo: [NSLocalizedDescriptionKey: message])
    }
    return URLError(refinedCode(error.code, message: message), userInfo: info)
  }

  /// A response libcurl could not take, as FoundationNetworking reports it.
  struct MalformedResponse {
    /// How libcurl's message starts.
    let prefix: String
    /// The code FoundationNetworking gives it.
    let reported: URLError.Code
    /// The code it means.
    let code: URLError.Code
    /// What happened, after libcurl's words, where those mislead; else empty.
    let explanation: String
  }

  /// The responses libcurl refuses, measured on Swift 6.3.1 (libcurl 7.88) against servers
  /// that send them; none is retried by default, except a transfer cut short.
  ///
  /// FoundationNetworking reads header lines as UTF-8 and fails the transfer on one that is
  /// not, such as a field value in ISO-8859-1 (`X-Name: \u{E9}` as the single byte 0xE9), which
  /// gunicorn sends for non-ASCII text; libcurl refuses a header line over 100 KiB as if it were
  /// out of memory.
  static let malformedResponses = [
    MalformedResponse(
      prefix: "Failed writing header", reported: .unknown, code: .cannotParseResponse,
      explanation: " (FoundationNetworking could not read a header field of the response: it accepts"
        + " only UTF-8, and a value in ISO-8859-1 is the usual cause)"),
    MalformedResponse(
      prefix: "Out of memory", reported: .unknown, code: .cannotParseResponse,
      explanation: " (libcurl's words, usually, for a response header line over its limit of 100 KiB)"),
    MalformedResponse(
      prefix: "Illegal or missing hexadecimal sequence in chunked-encoding", reported: .unknown,
      code: .cannotParseResponse, explanation: ""),
    MalformedResponse(
      prefix: "Error while processing content unencoding", reported: .unknown, code: .cannotDecodeContentData,
      explanation: " (the body is not in the Content-Encoding the response declares)"),
    MalformedResponse(
      prefix: "Received HTTP/0.9 when not allowed", reported: .unsupportedURL, code: .cannotParseResponse,
      explanation: " (the server did not answer in HTTP)"),
    MalformedResponse(
      prefix: "transfer closed with", reported: .unknown, code: .networkConnectionLost, explanation: ""),
  ]

  /// The malformed response that `message`, reported with `code`, describes, if any.
  static func malformedResponse(_ message: String, code: URLError.Code) -> MalformedResponse? {
    malformedResponses.first { $0.reported == code && message.hasPrefix($0.prefix) }
  }

  /// Returns the message FoundationNetworking gave the error, if it gave one.
  static func message(of error: URLError) -> String? {
    error.failureMessage
  }

  /// Returns the code libcurl's `message` means, when FoundationNetworking only said `.unknown`.
  ///
  /// libcurl's messages (7.88 with OpenSSL 3, measured): "SSL certificate problem: …" for a
  /// certificate that does not verify (self-signed, unknown issuer, expired); "SSL: no
  /// alternative certificate subject name matches target host name …" or "SSL: certificate
  /// subject name … does not match target host name …" for a name mismatch; other "SSL"/"TLS"
  /// texts for a handshake that failed ("wrong version number" from a plain HTTP server); and
  /// those of `malformedResponses`.
  static func refinedCode(_ code: URLError.Code, message: String?) -> URLError.Code {
    guard let message else { return code }
    if let malformed = malformedResponse(message, code: code) { return malformed.code }
    guard code == .unknown else { return code }
    if message.hasPrefix("SSL certificate problem:") {
      if message.contains("certificate has expired") { return .serverCertificateHasBadDate }
      if message.contains("certificate is not yet valid") { return .serverCertificateNotYetValid }
      return .serverCertificateUntrusted
    }
    if message.contains("subject name"), message.contains("target host name") {
      return .serverCertificateUntrusted
    }
    if message.contains("SSL") || message.contains("TLS") { return .secureConnectionFailed }
    return code
  }
}

extension Redaction {
  /// Returns `text` with every URL in it stripped of its user-info and query, bounded to `limit`
  /// characters.
  ///
  /// A transport error's message comes from FoundationNetworking and libcurl, which may quote a
  /// URL; the error's own URL is kept apart (`HTTPError.url`), so the message needs none of it.
  static func message(_ text: String, limit: Int) -> String {
    let redacted = text.replacing(/[A-Za-z][A-Za-z0-9+.\-]*:\/\/[^\s'"<>]+/) { match in
      redactedURL(String(match.output))
    }
    return redacted.count > limit ? String(redacted.prefix(limit)) + "…" : redacted
  }

  /// Returns `text`, a URL, without user-info and with its query replaced by the placeholder;
  /// the placeholder alone if it does not parse.
  private static func redactedURL(_ text: String) -> String {
    guard var components = URLComponents(string: text) else { return placeholder }
    // An empty query is what an already redacted URL leaves ("…?" before the placeholder,
    // which ends the match): kept as is, so that redacting twice changes nothing.
    let hadQuery = !(components.percentEncodedQuery ?? "").isEmpty
    components.user = nil
    components.password = nil
    if hadQuery { components.percentEncodedQuery = nil }
    guard let string = components.string else { return placeholder }
    return hadQuery ? "\(string)?\(placeholder)" : string
  }
}

extension HTTPError {
  /// Returns a transport error with a clean `URLError`, as `TransportFailure` builds it.
  ///
  /// Its code is refined from libcurl's message where FoundationNetworking gave `.unknown`; the
  /// message is kept with credentials removed, and the URL without user-info.
  static func transportFailure(_ error: URLError, url: URL?) -> HTTPError {
    .transport(TransportFailure.urlError(from: error, url: url), url: url.map(Redaction.url))
  }
}
