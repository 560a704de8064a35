import Dispatch
import Promises

extension Plan {
  /// Workload 3: 100,000 callbacks registered on an already fulfilled value (per op).
  func resolvedThenCases() -> [BenchCase] {
    let workload = workload(
      "resolved-then", "`then` on an already fulfilled promise, wait until all callbacks ran",
      unit: "op", units: (full: 100_000, smoke: 100), samples: 30)
    let ops = workload.units
    // The value is 1; every callback reports value + 1.
    let expected = 2 * ops

    return [
      BenchCase(workload: workload, variant: "inline", expected: expected) {
        let future = InlineFuture()
        future.fulfill(1)
        return {
          var sum = 0
          for _ in 0..<ops { future.whenDone { value in sum &+= value + 1 } }
          return sum
        }
      },
      BenchCase(workload: workload, variant: "dispatch", expected: expected) {
        let countdown = Countdown(ops)
        let value = 1
        return {
          for _ in 0..<ops { baselineQueue.async { countdown.arrive(adding: value + 1) } }
          return try countdown.wait()
        }
      },
      BenchCase(workload: workload, variant: "handoff-floor", expected: expected) {
        // What batching alone can reach: see `FloorOutbox`.
        let outbox = FloorOutbox(queue: callbackQueue)
        let countdown = Countdown(ops)
        let value = 1
        return {
          for _ in 0..<ops { outbox.post { countdown.arrive(adding: value + 1) } }
          return try countdown.wait()
        }
      },
      BenchCase(workload: workload, variant: "async-task-value", expected: expected) {
        {
          // `await task.value` on a task that has already completed.
          try blockingAwait {
            let task = Task { 1 }
            _ = await task.value
            var sum = 0
            for _ in 0..<ops { sum &+= await task.value + 1 }
            return sum
          }
        }
      },
      BenchCase(workload: workload, variant: "promise", expected: expected) {
        let promise = Promise(1)
        let countdown = Countdown(ops)
        return {
          for _ in 0..<ops {
            _ = promise.map(on: callbackQueue) { value in countdown.arrive(adding: value + 1) }
          }
          return try countdown.wait()
        }
      },
      BenchCase(workload: workload, variant: "promise-default", expected: expected) {
        let promise = Promise(1)
        let countdown = Countdown(ops)
        return {
          for _ in 0..<ops {
            _ = promise.map { value in countdown.arrive(adding: value + 1) }
          }
          return try countdown.wait()
        }
      },
    ]
  }
}
