import Dispatch
import Foundation
import Testing

@testable import Promises

/// Callback queues: the default queue, queue kinds, and `dispatchPrecondition`.
///
/// Ordering guarantees per queue kind are tested in `Rule3RegistrationOrderTests`: on a serial
/// queue the callbacks of one promise *run* in registration order; on a concurrent queue they
/// are *submitted* in registration order and may run at the same time.
///
/// `DispatchQueue.promises` is a process-wide setting read by every other suite running in
/// parallel, so the tests that change it run in a child process (exit tests).
@Suite("Callback queues", .timeLimit(.minutes(1)))
struct QueueTests {
  @Test func theDefaultQueueIsThePrivateSerialQueue() {
    #expect(DispatchQueue.promises.label == "com.promises.default")
    #expect(DispatchQueue.promises !== DispatchQueue.main)
  }

  @Test(arguments: CallbackQueueKind.allCases)
  func dispatchPreconditionHoldsInEveryCallback(kind: CallbackQueueKind) async throws {
    // dispatchPrecondition stops the process on failure; the checker-based tests in Rule 2 turn
    // the same check into an ordinary test failure.
    let queue = kind.makeQueue()
    let chain = Promise(1)
      .map(on: queue) { value -> Int in
        dispatchPrecondition(condition: .onQueue(queue))
        return value
      }
      .map { value -> Int in
        dispatchPrecondition(condition: .onQueue(.promises))
        dispatchPrecondition(condition: .notOnQueue(queue))
        return value
      }
      .map(on: .main) { value -> Int in
        dispatchPrecondition(condition: .onQueue(.main))
        return value
      }
    #expect(try await chain.value == 1)
  }

  @Test func callbacksRunOnAGlobalConcurrentQueue() async throws {
    let checker = QueueChecker()
    let global = DispatchQueue.global(qos: .utility)
    let links = (0..<50).map { index in
      Promise(index).map(on: global) { value -> Int in
        checker.verify(global)
        return value
      }
    }
    #expect(try await Promise.all(links).value == Array(0..<50))
    checker.expectAllOnQueue(count: 50)
  }

  @Test func callbacksGivenAQueueThatTargetsAnotherRunOnIt() async throws {
    let checker = QueueChecker()
    let target = DispatchQueue(label: "tests.queue.target")
    let queue = DispatchQueue(label: "tests.queue.targeting", target: target)
    let chain = Promise(1).map(on: queue) { value -> Int in
      checker.verify(queue)
      dispatchPrecondition(condition: .onQueue(target))
      return value + 1
    }
    #expect(try await chain.value == 2)
    checker.expectAllOnQueue(count: 1)
  }

  @Test(arguments: CallbackQueueKind.allCases)
  func aChainGivesTheSameResultOnEveryKindOfQueue(kind: CallbackQueueKind) async throws {
    let queue = kind.makeQueue()
    let (head, resolver) = Promise<Int>.pending()
    let chain =
      head
      .map(on: queue) { $0 + 1 }
      .then(on: queue) { value in Promise(value * 2) }
      .map(on: queue) { _ -> Int in throw CoreTestError.first }
      .recover(on: queue) { _ in 100 }
      .validate(on: queue) { $0 == 100 }
    resolver.fulfill(1)
    #expect(try await chain.value == 100)
  }

  @Test func readingTheDefaultQueueFromManyThreadsIsSafe() {
    let labels = Guarded<Set<String>>([])
    DispatchQueue.concurrentPerform(iterations: 1_000) { _ in
      let label = DispatchQueue.promises.label
      labels.withLock { _ = $0.insert(label) }
    }
    #expect(labels.value == ["com.promises.default"])
  }

  @Test(.tags(.childProcess)) func settingTheDefaultQueueAppliesToChainsCreatedAfterwards() async {
    await #expect(processExitsWith: .success) {
      let custom = DispatchQueue(label: "tests.custom-default")
      let key = DispatchSpecificKey<Int>()
      custom.setSpecific(key: key, value: 1)
      let before = Promise(1).map { _ in DispatchQueue.getSpecific(key: key) }
      _ = try? before.wait(timeout: 10)
      DispatchQueue.promises = custom
      let after = Promise(1).map { _ in DispatchQueue.getSpecific(key: key) }
      let onCustom = try? after.wait(timeout: 10)
      exit(DispatchQueue.promises === custom && onCustom == .some(1) ? 0 : 1)
    }
  }

  @Test(.tags(.childProcess)) func aCommandLineProgramCanBlockInWaitForDefaultQueueWork() async {
    // The default queue is not the main queue: blocking the calling thread in `wait` while the
    // chain runs on the default queue does not deadlock, with no run loop and no dispatchMain.
    await #expect(processExitsWith: .success) {
      let chain = Promise(20).map { $0 + 1 }.then { value in Promise(value * 2) }
      let value = try? chain.wait(timeout: 10)
      exit(value == 42 ? 0 : 1)
    }
  }
}
