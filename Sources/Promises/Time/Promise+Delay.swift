import Dispatch

extension Promise {
  /// Returns a promise that settles like this one, `duration` after this one has settled.
  ///
  /// Both outcomes are delayed: a value and a rejection alike are passed on only once the time
  /// has passed. The clock starts when this promise settles, not when you call `delay`.
  /// Cancelling the returned promise cancels the timer, and cancels this promise when nothing
  /// else waits on it. `queue` is only where the timer fires: callbacks chained on the result
  /// run on their own queues.
  ///
  /// - Parameters:
  ///   - duration: How long to hold the outcome, measured by `scheduler`.
  ///   - queue: Where the timer's work runs; `DispatchQueue.promises` by default.
  ///   - scheduler: The clock; `PromiseSchedulers.default` (real time) unless you pass one.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise with this promise's outcome, settled `duration` later.
  public func delay(
    _ duration: Duration, on queue: DispatchQueue = .promises,
    scheduler: any PromiseScheduler = PromiseSchedulers.default,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<Value> {
    // The timer's work holds the resolver (through a box that lets go of it when the promise
    // is cancelled): should a scheduler drop the work without running it, the promise is
    // rejected with `brokenPromise` rather than left pending.
    let (delayed, timer, box) = TimedResult.derived(from: self, needing: queue, file: file, line: line)
    // Cancelling empties the box, which retires the node: the source can then be cancelled.
    box.forward(from: self) { [timer, box] outcome in
      timer.start(after: duration, on: queue, scheduler: scheduler) { box.resolve(outcome) }
    }
    return delayed
  }
}

extension Promise where Value == Void {
  /// Returns a promise that is fulfilled once `duration` has passed.
  ///
  /// The clock starts now. Use it to wait inside a chain — `Promise.after(.seconds(1)).then {
  /// poll() }` — or as the losing side of a `race`. Cancelling the promise cancels its timer.
  ///
  /// - Parameters:
  ///   - duration: How long to wait, measured by `scheduler`.
  ///   - queue: Where the timer's work runs; `DispatchQueue.promises` by default.
  ///   - scheduler: The clock; `PromiseSchedulers.default` (real time) unless you pass one.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A `Promise<Void>` fulfilled after `duration`.
  public static func after(
    _ duration: Duration, on queue: DispatchQueue = .promises,
    scheduler: any PromiseScheduler = PromiseSchedulers.default,
    file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<Void> {
    let (timed, resolver) = Promise<Void>.pending(needing: queue, file: file, line: line)
    let timer = TimerSlot()
    timed.addCancelHandler { [weak timer] in timer?.disarm() }
    timer.start(after: duration, on: queue, scheduler: scheduler) { resolver.fulfill() }
    return timed
  }
}
