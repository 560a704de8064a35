import Dispatch

extension Promise {
  /// Returns a promise that settles like this one, or is rejected with `PromiseError.timedOut`
  /// when `duration` passes first.
  ///
  /// The clock starts when you call `timeout`, not when the work started. When time runs out,
  /// the returned promise is rejected with `PromiseError.timedOut(after: duration, createdAt:)`
  /// and this promise is cancelled — its work stopped, through `Resolver.onCancel` — unless
  /// something else still waits on it. Cancelling the returned promise cancels this one the
  /// same way. When this promise settles first, the timer is cancelled and released at once.
  /// `queue` is only where the timer fires: callbacks chained on the result run on their own
  /// queues, as always.
  ///
  /// - Parameters:
  ///   - duration: The time allowed, measured by `scheduler`.
  ///   - queue: Where the timer's work runs; `DispatchQueue.promises` by default.
  ///   - scheduler: The clock; `PromiseSchedulers.default` (real time) unless you pass one,
  ///     such as a `VirtualTimeScheduler` in tests.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise with this promise's outcome, or a `timedOut` rejection.
  public func timeout(
    _ duration: Duration, on queue: DispatchQueue = .promises,
    scheduler: any PromiseScheduler = PromiseSchedulers.default,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<Value> {
    // The source's forwarding node and the timer share the resolver through a box that lets go
    // of it at settlement, so a shared source that stays pending does not keep the timed-out
    // promise alive. Emptying the box (time out, cancellation) retires the node, so the source
    // counts it no more as an observer and can be cancelled.
    let (limited, timer, box) = TimedResult.derived(from: self, needing: queue, file: file, line: line)
    box.forward(from: self) { [box, timer] outcome in
      box.resolve(outcome)
      timer.disarm()
    }
    if !limited.isPending { return limited }
    let error = PromiseError.timedOut(after: duration, createdAt: limited.creationSite)
    timer.start(after: duration, on: queue, scheduler: scheduler) { [box, weak source = self] in
      // Taking the resolver retires the forwarding node: the source can then be cancelled.
      guard let resolver = box.take() else { return }
      // The source may have settled already, its forwarding node not run yet: a settling
      // thread runs internal nodes only after dispatching the queue callbacks, and may be
      // preempted in between. A settlement that came before the deadline fired wins.
      if let outcome = source?.result {
        resolver.resolve(outcome)
        return
      }
      let (settled, upstream) = resolver.token.promise.reject(error)
      if settled { Promise.propagateCancellation(from: upstream) }
    }
    return limited
  }
}
