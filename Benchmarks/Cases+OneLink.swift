import Dispatch
import Promises

extension Plan {
  /// Workload 1: a pending value, one callback, fulfil, block until the callback ran (per op).
  func oneLinkCases() -> [BenchCase] {
    let workload = workload(
      "one-link", "pending promise, one `then`, fulfil, block until the callback ran", unit: "op",
      units: (full: 1_000, smoke: 10), samples: 50)
    let ops = workload.units
    // Each op i yields i + 1.
    let expected = sumBelow(ops + 1)

    return [
      BenchCase(workload: workload, variant: "inline", expected: expected) {
        {
          var sum = 0
          for i in 0..<ops {
            let future = InlineFuture()
            var out = 0
            future.whenDone { value in out = value + 1 }
            future.fulfill(i)
            sum &+= out
          }
          return sum
        }
      },
      BenchCase(workload: workload, variant: "dispatch", expected: expected) {
        {
          // The callback is dispatched to the serial queue and signals the blocked caller.
          let completion = Completion()
          var sum = 0
          for i in 0..<ops {
            baselineQueue.async { completion.complete(i + 1) }
            sum &+= try completion.wait()
          }
          return sum
        }
      },
      BenchCase(workload: workload, variant: "async-task", expected: expected) {
        {
          // One child `Task` per op, awaited by the driving task: one executor hop each way.
          try blockingAwait {
            var sum = 0
            for i in 0..<ops {
              sum &+= await Task { i + 1 }.value
            }
            return sum
          }
        }
      },
      BenchCase(workload: workload, variant: "promise", expected: expected) {
        {
          var sum = 0
          for i in 0..<ops {
            let (promise, resolver) = Promise<Int>.pending()
            let next = promise.map(on: callbackQueue) { value in value + 1 }
            resolver.fulfill(i)
            sum &+= try next.wait(timeout: waitLimitSeconds)
          }
          return sum
        }
      },
      BenchCase(workload: workload, variant: "promise-default", expected: expected) {
        {
          var sum = 0
          for i in 0..<ops {
            let (promise, resolver) = Promise<Int>.pending()
            let next = promise.map { value in value + 1 }
            resolver.fulfill(i)
            sum &+= try next.wait(timeout: waitLimitSeconds)
          }
          return sum
        }
      },
    ]
  }
}
