import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Obtains a token through a promise, attaches it to requests, and refreshes it once on a 401.
///
/// Give it to a client as `HTTPClient.Configuration.authenticator`. Before each request the client asks for
/// the current token (fetching one the first time) and sends `Authorization: <scheme> <token>`
/// unless the request sets `Authorization` itself. When the server answers 401, the client asks
/// for a fresh token and replays the request once; a second 401 is reported as
/// `HTTPError.unacceptableStatus`. Fetches are single-flight: however many requests need a token
/// at once, `fetchToken` runs once and they all share its outcome.
///
/// `fetchToken` runs on the thread that needs the token, outside any lock. Fetch the token with
/// a client that has no authenticator (the token endpoint must not wait for a token), and do
/// not capture the authenticated client strongly in it: that would be a retain cycle.
public final class TokenAuthenticator: Sendable {
  private let state = LockedBox<State>(.empty)
  private let fetchToken: @Sendable () -> Promise<String>
  /// The authorization scheme put before the token, `"Bearer"` by default.
  public let scheme: String

  private enum State: Sendable {
    case empty
    case fetching(Promise<String>)
    case valid(String)
  }

  /// Creates an authenticator that gets tokens from `fetchToken`.
  ///
  /// - Parameters:
  ///   - scheme: Put before the token in the `Authorization` header; `"Bearer"` by default.
  ///   - fetchToken: Returns a promise of a new token; called for the first request and after a
  ///     401, never twice at the same time.
  public init(scheme: String = "Bearer", fetchToken: @escaping @Sendable () -> Promise<String>) {
    self.scheme = scheme
    self.fetchToken = fetchToken
  }

  /// Forgets the current token: the next request fetches a new one.
  public func invalidate() {
    state.withLock { state in
      if case .valid = state { state = .empty }
    }
  }

  /// Returns the current token, fetching it if there is none (single-flight).
  func token() -> Promise<String> {
    let next: Next = state.withLock { state in
      switch state {
      case .valid(let token): return .token(token)
      case .fetching(let promise): return .shared(promise)
      case .empty: return Self.startFetch(in: &state)
      }
    }
    return run(next)
  }

  /// Returns a token other than `stale`: the one a concurrent refresh got, or a new one.
  func token(replacing stale: String) -> Promise<String> {
    let next: Next = state.withLock { state in
      switch state {
      case .valid(let token) where token != stale: return .token(token)
      case .fetching(let promise): return .shared(promise)
      case .valid, .empty: return Self.startFetch(in: &state)
      }
    }
    return run(next)
  }

  /// The `Authorization` header value for `token`.
  func headerValue(for token: String) -> String {
    scheme.isEmpty ? token : "\(scheme) \(token)"
  }

  /// What a token request does after unlocking.
  private enum Next {
    case token(String)
    case shared(Promise<String>)
    case fetch(Promise<String>, Promise<String>.Resolver)
  }

  /// Marks a fetch as started (inside `withLock`); the fetch itself starts after unlocking.
  private static func startFetch(in state: inout State) -> Next {
    let (shared, resolver) = Promise<String>.pending()
    state = .fetching(shared)
    return .fetch(shared, resolver)
  }

  /// Runs what a token request decided, after unlocking.
  private func run(_ next: Next) -> Promise<String> {
    switch next {
    case .token(let token):
      return Promise(token)
    case .shared(let promise):
      return promise
    case .fetch(let shared, let resolver):
      fetchToken().whenSettled(on: .global()) { [self] result in
        state.withLock { state in
          if case .fetching(let current) = state, current === shared {
            switch result {
            case .success(let token): state = .valid(token)
            case .failure: state = .empty
            }
          }
        }
        resolver.resolve(result)
      }
      return shared
    }
  }
}

extension TokenAuthenticator: HTTPInterceptor {
  /// Returns `request` with `Authorization: <scheme> <token>`, fetching the token if none is held.
  ///
  /// A request that already has an `Authorization` field is passed on unchanged.
  public func adapt(_ request: URLRequest, for attempt: HTTPAttempt) -> Promise<URLRequest> {
    guard request.value(forHTTPHeaderField: "Authorization") == nil else { return Promise(request) }
    return token().map { [self] token in
      var request = request
      request.setValue(headerValue(for: token), forHTTPHeaderField: "Authorization")
      return request
    }
  }

  /// Returns `.replay` after refreshing the token, for the first 401 of a request that carried
  /// one; `.proceed` otherwise (a second 401 is delivered as `HTTPError.unacceptableStatus`).
  public func decide(
    _ outcome: Result<HTTPResponse, HTTPError>, for request: URLRequest, attempt: HTTPAttempt
  ) -> Promise<HTTPDecision> {
    guard case .success(let response) = outcome, response.statusCode == 401, attempt.replays == 0,
      let sent = request.value(forHTTPHeaderField: "Authorization")
    else { return Promise(.proceed) }
    let prefix = scheme.isEmpty ? "" : "\(scheme) "
    guard sent.hasPrefix(prefix) else { return Promise(.proceed) }
    return token(replacing: String(sent.dropFirst(prefix.count))).map { _ in HTTPDecision.replay }
  }
}

extension TokenAuthenticator: CustomStringConvertible, CustomReflectable {
  /// The scheme and whether a token is held; never the token itself.
  public var description: String {
    let held: String = state.withLock { state in
      switch state {
      case .empty: "no token"
      case .fetching: "fetching a token"
      case .valid: "token \(Redaction.placeholder)"
      }
    }
    return "TokenAuthenticator(\(scheme), \(held))"
  }

  /// A mirror without the token, so `dump` shows no secret.
  public var customMirror: Mirror {
    Mirror(self, children: ["scheme": scheme, "state": description], displayStyle: .class)
  }
}
