import Dispatch
import Promises

extension Plan {
  /// Workload 2: a 1,000-link chain on one serial queue, fulfilled at the head (per link).
  func chainCases() -> [BenchCase] {
    let workload = workload(
      "chain", "`then` links on one pending promise on one serial queue, fulfil the head, wait for the tail",
      unit: "link",
      units: (full: 1_000, smoke: 10), samples: 200)
    return chainVariants(workload, withInline: true)
  }

  /// Workload 6: the same chain with 1,000,000 links: total time and peak resident memory.
  func deepChainCases() -> [BenchCase] {
    let workload = workload(
      "deep-chain", "the chain, a million links long: time and peak resident memory (runs last)",
      unit: "link", units: (full: 1_000_000, smoke: 1_000), samples: 3, measuresPeakMemory: true)
    // A million nested inline completions would recurse a million frames deep: no inline variant.
    return chainVariants(workload, withInline: false)
  }

  /// Every variant builds `units` links starting from 0, each adding 1, so the tail is `units`.
  private func chainVariants(_ workload: Workload, withInline: Bool) -> [BenchCase] {
    let links = workload.units
    var cases: [BenchCase] = []
    if withInline {
      cases.append(
        BenchCase(workload: workload, variant: "inline", expected: links) {
          {
            // Each link's completion fulfils the next: fulfilling the head recurses `links` deep.
            let head = InlineFuture()
            var tail = head
            for _ in 0..<links {
              let next = InlineFuture()
              tail.whenDone { value in next.fulfill(value + 1) }
              tail = next
            }
            var result = 0
            tail.whenDone { value in result = value }
            head.fulfill(0)
            return result
          }
        })
    }
    cases += [
      BenchCase(workload: workload, variant: "dispatch", expected: links) {
        {
          // Each hop runs on the serial queue and async-dispatches the next hop to it.
          let completion = Completion()
          dispatchHop(remaining: links, value: 0, on: baselineQueue, finish: completion)
          return try completion.wait()
        }
      },
      BenchCase(workload: workload, variant: "async-call", expected: links) {
        {
          // A loop of awaits on an async function that does not suspend: the async floor.
          try blockingAwait {
            var value = 0
            for _ in 0..<links { value = await asyncIncrement(value) }
            return value
          }
        }
      },
      BenchCase(workload: workload, variant: "async-yield", expected: links) {
        {
          // Each link suspends and is re-enqueued on the executor: the async analogue of a hop.
          try blockingAwait {
            var value = 0
            for _ in 0..<links {
              await Task.yield()
              value += 1
            }
            return value
          }
        }
      },
      BenchCase(workload: workload, variant: "promise", expected: links) {
        {
          let (head, resolver) = Promise<Int>.pending()
          var tail = head
          for _ in 0..<links { tail = tail.map(on: callbackQueue) { value in value + 1 } }
          resolver.fulfill(0)
          return try tail.wait(timeout: waitLimitSeconds)
        }
      },
      BenchCase(workload: workload, variant: "promise-default", expected: links) {
        {
          let (head, resolver) = Promise<Int>.pending()
          var tail = head
          for _ in 0..<links { tail = tail.map { value in value + 1 } }
          resolver.fulfill(0)
          return try tail.wait(timeout: waitLimitSeconds)
        }
      },
    ]
    return cases
  }
}

/// One hop of the hand-written Dispatch chain: dispatches the next hop to `queue`, or finishes.
func dispatchHop(remaining: Int, value: Int, on queue: DispatchQueue, finish: Completion) {
  if remaining == 0 {
    finish.complete(value)
    return
  }
  queue.async { dispatchHop(remaining: remaining - 1, value: value + 1, on: queue, finish: finish) }
}

@inline(never)
func asyncIncrement(_ value: Int) async -> Int { value + 1 }
