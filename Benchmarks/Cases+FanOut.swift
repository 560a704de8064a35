import Dispatch
import Promises

extension Plan {
  /// Workload 8: 10,000 pending promises, each with one `then(on:)` on the same serial queue,
  /// settled one by one from another thread; wait until every callback ran (per promise).
  /// Creating the promises, registering the callbacks and starting the settling thread are
  /// setup (untimed); settling and waiting are timed.
  func fanOutCases() -> [BenchCase] {
    let workload = workload(
      "fan-out", "pending promises with one `then` each, settled from another thread",
      unit: "promise", units: (full: 10_000, smoke: 100), samples: 100)
    let count = workload.units
    // Promise i is fulfilled with i; every callback reports its value.
    let expected = sumBelow(count)

    return [
      BenchCase(workload: workload, variant: "dispatch", expected: expected) {
        // The hand-written equivalent: the settling thread enqueues one block per item.
        let countdown = Countdown(count)
        let settler = RacingThread {
          for index in 0..<count { baselineQueue.async { countdown.arrive(adding: index) } }
        }
        return {
          settler.go()
          try settler.join()
          return try countdown.wait()
        }
      },
      fanOutPromiseCase(workload, variant: "promise", queue: callbackQueue, expected: expected),
      fanOutPromiseCase(workload, variant: "promise-default", queue: nil, expected: expected),
    ]
  }

  /// The promise variant: `queue` is the `on:` queue, `nil` for the default queue.
  private func fanOutPromiseCase(
    _ workload: Workload, variant: String, queue: DispatchQueue?, expected: Int
  ) -> BenchCase {
    let count = workload.units
    return BenchCase(workload: workload, variant: variant, expected: expected) {
      let countdown = Countdown(count)
      let pending = (0..<count).map { _ in Promise<Int>.pending() }
      let links = pending.map { promise, _ in
        if let queue {
          return promise.map(on: queue) { value in countdown.arrive(adding: value) }
        }
        return promise.map { value in countdown.arrive(adding: value) }
      }
      let resolvers = pending.map(\.resolver)
      let settler = RacingThread {
        for (index, resolver) in resolvers.enumerated() { resolver.fulfill(index) }
      }
      return {
        settler.go()
        try settler.join()
        let sum = try countdown.wait()
        withExtendedLifetime(links) {}
        return sum
      }
    }
  }
}
