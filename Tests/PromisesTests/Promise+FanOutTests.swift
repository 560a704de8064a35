import Testing

@testable import Promises

/// `FanOutState`, the bookkeeping behind `Promise.all(maxConcurrent:)`, tested as a value
/// (the behaviour through the public API is in `Promise+ConcurrentTests.swift`).
@Suite("FanOutState, as a value")
struct FanOutStateTests {
  /// A running input whose promise stays pending: its index is its promise's identity.
  private func input() -> RunningInput<Int> {
    RunningInput(promise: Promise<Int>.pending().promise, node: ForwardingNode<Int> { _ in })
  }

  @Test func theFirstStartsAreCappedByTheLimit() {
    var state = FanOutState<Int>(count: 5, limit: 2)
    let first = state.startInitial()
    #expect(first == 0..<2)
    var small = FanOutState<Int>(count: 1, limit: 3)
    let all = small.startInitial()
    #expect(all == 0..<1)
  }

  @Test func eachValueStartsTheNextInputAndTheLastHandsOverEveryValueInOrder() {
    var state = FanOutState<Int>(count: 3, limit: 2)
    let first = state.startInitial()
    #expect(first == 0..<2)
    let started = (state.started(input(), at: 0), state.started(input(), at: 1))
    #expect(started == (true, true))
    guard case .start(2) = state.fulfilled(11, at: 1) else {
      Issue.record("the first value must start input 2")
      return
    }
    let startedLast = state.started(input(), at: 2)
    #expect(startedLast)
    guard case .none = state.fulfilled(12, at: 2) else {
      Issue.record("nothing is left to start, and input 0 still runs")
      return
    }
    guard case .fulfill(let values) = state.fulfilled(10, at: 0) else {
      Issue.record("the last value must finish the fan-out")
      return
    }
    #expect(values == [10, 11, 12])
    #expect(state.isFinished)
  }

  @Test func failingHandsOverTheRunningInputsInInputOrderAndOnlyOnce() {
    var state = FanOutState<Int>(count: 4, limit: 4)
    _ = state.startInitial()
    let inputs = (0..<4).map { _ in input() }
    for index in [3, 1, 2] {
      let started = state.started(inputs[index], at: index)
      #expect(started)
    }
    _ = state.fulfilled(20, at: 2)
    guard let stopped = state.fail() else {
      Issue.record("the first failure must stop the fan-out")
      return
    }
    let running = stopped.running.compactMap { $0?.promise }
    #expect(running.count == 2)
    #expect(zip(running, [inputs[1].promise, inputs[3].promise]).allSatisfy { $0 === $1 })
    #expect(stopped.values == [nil, nil, 20, nil])
    let failedAgain = state.fail() != nil
    #expect(!failedAgain)
    let startedAfterwards = state.started(input(), at: 0)
    #expect(!startedAfterwards)
    guard case .none = state.fulfilled(0, at: 0) else {
      Issue.record("a value after the failure must be ignored")
      return
    }
  }
}
