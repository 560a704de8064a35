import Dispatch
import Promises

extension Plan {
  /// Workload 4: `Promise.all` over 1,000 pending promises fulfilled one by one (per element).
  /// Creating the pending inputs is setup (untimed); joining, fulfilling and waiting are timed.
  func allCombinatorCases() -> [BenchCase] {
    let workload = workload(
      "all", "`Promise.all` over pending promises fulfilled one by one", unit: "element",
      units: (full: 1_000, smoke: 10), samples: 200)
    let count = workload.units
    // Element i is fulfilled with i; the checksum weighs each by its position, so order matters.
    let expected = (0..<count).reduce(0) { sum, i in sum &+ i &* (i + 1) }

    return [
      BenchCase(workload: workload, variant: "inline", expected: expected) {
        let futures = (0..<count).map { _ in InlineFuture() }
        return {
          var results = [Int](repeating: 0, count: count)
          var remaining = count
          for (index, future) in futures.enumerated() {
            future.whenDone { value in
              results[index] = value
              remaining -= 1
            }
          }
          for (index, future) in futures.enumerated() { future.fulfill(index) }
          precondition(remaining == 0)
          return weightedSum(results)
        }
      },
      BenchCase(workload: workload, variant: "dispatch", expected: expected) {
        {
          // Each fulfilment dispatches its completion to the serial queue, which joins them with a
          // counter and signals when the last one arrived.
          let join = SerialJoin(count)
          for index in 0..<count {
            baselineQueue.async { join.store(index, at: index) }
          }
          return try join.wait()
        }
      },
      BenchCase(workload: workload, variant: "async-taskgroup", expected: expected) {
        {
          try blockingAwait {
            await withTaskGroup(of: (Int, Int).self) { group in
              for index in 0..<count { group.addTask { (index, index) } }
              var results = [Int](repeating: 0, count: count)
              for await (index, value) in group { results[index] = value }
              return weightedSum(results)
            }
          }
        }
      },
      BenchCase(workload: workload, variant: "promise", expected: expected) {
        let pending = (0..<count).map { _ in Promise<Int>.pending() }
        return {
          let all = Promise.all(pending.map(\.0))
          for (index, (_, resolver)) in pending.enumerated() { resolver.fulfill(index) }
          return weightedSum(try all.wait(timeout: waitLimitSeconds))
        }
      },
    ]
  }
}

/// Σ (i + 1) × values[i]: position-sensitive, so a reordering changes it.
func weightedSum(_ values: [Int]) -> Int {
  var sum = 0
  for (index, value) in values.enumerated() { sum &+= (index + 1) &* value }
  return sum
}

/// The Dispatch baseline's join: stores results and counts down, the last store signals.
///
/// `@unchecked Sendable`: `results` and `remaining` are only mutated by `store`, which every caller
/// runs inside a block on the one serial `baselineQueue`, so the mutations are serialized; `wait()`
/// reads `results` only after the last `store` signalled `done`, and the semaphore orders that read
/// after every write.
final class SerialJoin: @unchecked Sendable {
  private var results: [Int]
  private var remaining: Int
  private let done = DispatchSemaphore(value: 0)

  init(_ count: Int) {
    results = [Int](repeating: 0, count: count)
    remaining = count
  }

  func store(_ value: Int, at index: Int) {
    results[index] = value
    remaining -= 1
    if remaining == 0 { done.signal() }
  }

  func wait() throws -> Int {
    try waitOrFail(done, "the last completion")
    return weightedSum(results)
  }
}
