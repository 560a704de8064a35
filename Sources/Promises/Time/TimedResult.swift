import Dispatch

/// The result of a timer-based operator (`timeout`, `delay`), its timer, and the box that
/// holds its resolver.
enum TimedResult {
  /// Returns a pending promise derived from `source`, with a timer and a resolver box that
  /// its cancellation disarms and empties.
  ///
  /// The promise reports `queue`, where the timer fires, to `wait`'s deadlock check.
  static func derived<Value: Sendable>(
    from source: Promise<Value>, needing queue: DispatchQueue, file: StaticString, line: UInt
  ) -> (result: Promise<Value>, timer: TimerSlot, box: OnceResolver<Value>) {
    let (result, resolver) = Promise<Value>.pending(
      needing: queue, upstream: source, file: file, line: line)
    let timer = TimerSlot()
    let box = OnceResolver(resolver)
    result.addCancelHandler { [weak timer, weak box] in
      timer?.disarm()
      _ = box?.take()
    }
    return (result, timer, box)
  }
}
