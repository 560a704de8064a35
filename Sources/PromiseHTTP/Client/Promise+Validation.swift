import Dispatch
import Promises

extension Promise where Value == HTTPResponse {
  /// Returns a promise of the same response if its status is in `statusCodes`.
  ///
  /// The client already rejects statuses outside its `acceptableStatusCodes` (200–299 by
  /// default); use this to narrow them (`validate(statusCodes: 200..<201)`), or with a client
  /// that accepts every status. A status outside the range rejects with
  /// `HTTPError.unacceptableStatus` (status, headers, a bounded body excerpt, the URL).
  ///
  /// - Parameters:
  ///   - queue: Where the check runs; `DispatchQueue.promises` by default.
  ///   - statusCodes: The acceptable statuses; 200–299 by default.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the response, or a rejection.
  public func validate(
    on queue: DispatchQueue = .promises, statusCodes: Range<Int> = 200..<300,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    map(on: queue, file: file, line: line) { response in
      guard statusCodes.contains(response.statusCode) else { throw HTTPError.unacceptable(response) }
      return response
    }
  }

  /// Returns a promise of the same response if its `Content-Type` media type is one of `contentTypes`.
  ///
  /// The comparison ignores case and parameters (`application/json; charset=utf-8` matches
  /// `application/json`). Any other type, or none, rejects with `HTTPError.unacceptableStatus`
  /// carrying the response's status, headers and excerpt.
  ///
  /// - Parameters:
  ///   - queue: Where the check runs; `DispatchQueue.promises` by default.
  ///   - contentTypes: The acceptable media types, for example `["application/json"]`.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise of the response, or a rejection.
  public func validate(
    on queue: DispatchQueue = .promises, contentTypes: Set<String>,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<HTTPResponse> {
    let wanted = Set(contentTypes.map { $0.lowercased() })
    return map(on: queue, file: file, line: line) { response in
      let mediaType = response.headers["Content-Type"]?.split(separator: ";").first.map {
        $0.trimmingCharacters(in: .whitespaces).lowercased()
      }
      guard let mediaType, wanted.contains(mediaType) else { throw HTTPError.unacceptable(response) }
      return response
    }
  }
}
