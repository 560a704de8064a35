extension Promise {
  /// Returns a promise settled like the first of `promises` to settle, fulfilled or rejected.
  ///
  /// The first outcome wins, whether a value or an error; to wait for the first *value*,
  /// use `Promise.any`. The other inputs keep running after the race is decided — cancel them
  /// yourself if their work should stop. Cancelling the returned promise cancels every input
  /// that nothing else waits on. An empty array gives a promise rejected with
  /// `PromiseError.emptyRace`, since nothing could ever settle it.
  ///
  /// - Parameters:
  ///   - promises: The competing promises.
  ///   - file: The file that creates the promise, for diagnostics; leave the default.
  ///   - line: The line that creates the promise, for diagnostics; leave the default.
  /// - Returns: A promise with the outcome of the first input to settle.
  public static func race(
    _ promises: [Promise<Value>], file: StaticString = #fileID, line: UInt = #line
  ) -> Promise<Value> {
    guard !promises.isEmpty else {
      let site = CreationSite(file, UInt32(truncatingIfNeeded: line))
      return Promise(error: PromiseError.emptyRace(createdAt: site), file: file, line: line)
    }
    let (winner, resolver) = Promise<Value>.pending(file: file, line: line)
    winner.upstream = UpstreamGroup(promises)
    let box = OnceResolver(resolver, inputs: promises.count)
    box.take(whenCancelled: winner)
    box.forward(from: promises) { [box] _, outcome in box.resolve(outcome) }
    return winner
  }
}
