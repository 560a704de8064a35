import Foundation
import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Everything one request runs by, resolved once by `HTTPClient.send` from the client's
/// configuration and the request's own overrides: what `RequestOperation` needs besides the
/// client's shared transport and queue.
struct RequestSettings: Sendable {
  /// What the state machine decides by: the built request, acceptable statuses, timeout, queue
  /// wait, the request's deadline allowance.
  var machine: RequestStateMachine.Settings
  /// What each exchange runs by: body limit, redirect policy, sensitive names.
  var exchange: ExchangeSettings
  /// The request's own deadline, read when it is queued and when it is sent.
  var deadline: Deadline?
  /// The request's steps: authenticator, interceptors, retry policy.
  var chain: InterceptorChain
  /// The clock of the request's timers.
  var scheduler: any PromiseScheduler
  /// The queue of the client: timers, steps and settlement.
  var callbackQueue: DispatchQueue
}
