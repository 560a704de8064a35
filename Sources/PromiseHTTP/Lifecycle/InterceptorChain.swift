import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The ordered steps of one request: runs their `adapt`, `decide` and `observe` (see
/// `HTTPInterceptor` for the order and the rules).
///
/// A step that answers with a promise already settled (a token held, a retry decision) is
/// followed at once; one that is still pending is followed on `queue` when it settles.
struct InterceptorChain: Sendable {
  /// The steps that decide: all of them, in order.
  let steps: [any HTTPInterceptor]
  /// The steps that adapt: all but the retry policy, whose `adapt` is the default.
  let adapters: [any HTTPInterceptor]
  /// The steps that observe: the configured interceptors; the built-in steps (authenticator,
  /// retry policy) do not, so a client without other steps dispatches nothing for observation.
  let observers: [any HTTPInterceptor]
  let queue: DispatchQueue

  /// The chain of one request, from what `send` knows: the authenticator first (when it applies
  /// to the request), then `interceptors`, then the retry policy.
  init(
    authenticator: (any HTTPInterceptor)?, interceptors: [any HTTPInterceptor],
    retryPolicy: any HTTPInterceptor, queue: DispatchQueue
  ) {
    let adapters = (authenticator.map { [$0] } ?? []) + interceptors
    self.steps = adapters + [retryPolicy]
    self.adapters = adapters
    self.observers = interceptors
    self.queue = queue
  }

  /// A chain of `steps` that each adapt, decide and observe.
  init(_ steps: [any HTTPInterceptor], queue: DispatchQueue) {
    self.steps = steps
    self.adapters = steps
    self.observers = steps
    self.queue = queue
  }

  /// Runs every step's `adapt` in order, from `index`; `completion` gets the last request.
  func adapt(
    _ request: URLRequest, for attempt: HTTPAttempt, from index: Int = 0,
    completion: @escaping @Sendable (Result<URLRequest, any Error>) -> Void
  ) {
    var request = request
    for position in index..<adapters.count {
      let adapted = adapters[position].adapt(request, for: attempt)
      switch adapted.result {
      case .success(let next)?:
        request = next
      case .failure(let error)?:
        completion(.failure(error))
        return
      case nil:
        adapted.whenSettled(on: queue) { result in
          switch result {
          case .success(let next): adapt(next, for: attempt, from: position + 1, completion: completion)
          case .failure(let error): completion(.failure(error))
          }
        }
        return
      }
    }
    completion(.success(request))
  }

  /// Asks the steps in order, from `index`, until one decides something other than `.proceed`.
  func decide(
    _ outcome: Result<HTTPResponse, HTTPError>, for request: URLRequest, attempt: HTTPAttempt,
    from index: Int = 0, completion: @escaping @Sendable (Result<HTTPDecision, any Error>) -> Void
  ) {
    for position in index..<steps.count {
      let decision = steps[position].decide(outcome, for: request, attempt: attempt)
      switch decision.result {
      case .success(.proceed)?:
        continue
      case let settled?:
        completion(settled)
        return
      case nil:
        decision.whenSettled(on: queue) { result in
          if case .success(.proceed) = result {
            decide(outcome, for: request, attempt: attempt, from: position + 1, completion: completion)
          } else {
            completion(result)
          }
        }
        return
      }
    }
    completion(.success(.proceed))
  }

  /// Shows `event` to every observing step, on `queue`.
  func observe(_ event: HTTPEvent) {
    guard !observers.isEmpty else { return }
    queue.async { [observers] in
      for step in observers { step.observe(event) }
    }
  }
}
