import Dispatch
import Promises

extension Plan {
  /// Workload 5: 100,000 pending values; one thread fulfils them while another registers a
  /// callback on each; wait for all callbacks (per promise). Creating the pending values and the
  /// fulfilling thread is setup (untimed); the thread is released at the start of the timed body.
  func contentionCases() -> [BenchCase] {
    let workload = workload(
      "contention", "pending promises: one thread fulfils them, another chains a `then` on each",
      unit: "promise", units: (full: 100_000, smoke: 100), samples: 30)
    let count = workload.units
    // Promise i is fulfilled with i; every callback reports its value.
    let expected = sumBelow(count)

    return [
      handoffCase(workload, variant: "inline-locked", expected: expected) { value, callback in
        callback(value)
      },
      handoffCase(workload, variant: "dispatch", expected: expected) { value, callback in
        baselineQueue.async { callback(value) }
      },
      // The cheapest hand-written delivery: the callback is known before the values exist (no
      // registration racing the fulfilment, no slot), and the fulfilling thread does one
      // `queue.async` per value.
      BenchCase(workload: workload, variant: "dispatch-direct", expected: expected) {
        let countdown = Countdown(count)
        let callback: @Sendable (Int) -> Void = { value in countdown.arrive(adding: value) }
        let fulfiller = RacingThread {
          for index in 0..<count { baselineQueue.async { callback(index) } }
        }
        return {
          fulfiller.go()
          try fulfiller.join()
          return try countdown.wait()
        }
      },
      BenchCase(workload: workload, variant: "promise", expected: expected) {
        let pending = (0..<count).map { _ in Promise<Int>.pending() }
        let countdown = Countdown(count)
        let fulfiller = RacingThread {
          for (index, (_, resolver)) in pending.enumerated() { resolver.fulfill(index) }
        }
        return {
          fulfiller.go()
          for (promise, _) in pending {
            _ = promise.map(on: callbackQueue) { value in countdown.arrive(adding: value) }
          }
          try fulfiller.join()
          return try countdown.wait()
        }
      },
      BenchCase(workload: workload, variant: "promise-default", expected: expected) {
        let pending = (0..<count).map { _ in Promise<Int>.pending() }
        let countdown = Countdown(count)
        let fulfiller = RacingThread {
          for (index, (_, resolver)) in pending.enumerated() { resolver.fulfill(index) }
        }
        return {
          fulfiller.go()
          for (promise, _) in pending {
            _ = promise.map { value in countdown.arrive(adding: value) }
          }
          try fulfiller.join()
          return try countdown.wait()
        }
      },
    ]
  }

  /// The hand-written baseline: one lock-protected hand-off slot per value; the second of the two
  /// threads to arrive passes the value to the callback through `deliver`.
  private func handoffCase(
    _ workload: Workload, variant: String, expected: Int,
    deliver: @escaping @Sendable (Int, @escaping @Sendable (Int) -> Void) -> Void
  ) -> BenchCase {
    let count = workload.units
    return BenchCase(workload: workload, variant: variant, expected: expected) {
      let slots = (0..<count).map { _ in HandoffSlot() }
      let countdown = Countdown(count)
      let fulfiller = RacingThread {
        for (index, slot) in slots.enumerated() { slot.fulfill(index, deliver: deliver) }
      }
      return {
        fulfiller.go()
        for slot in slots {
          slot.whenDone({ value in countdown.arrive(adding: value) }, deliver: deliver)
        }
        try fulfiller.join()
        return try countdown.wait()
      }
    }
  }
}
