import Dispatch
import Testing

@testable import Promises

/// `QueueMark`: one mark per queue, whichever object names it, never reused.
@Suite("QueueMark", .timeLimit(.minutes(1)))
struct QueueMarkTests {
  @Test func aQueueIsCurrentOnlyInsideItsOwnBlocks() {
    let queue = DispatchQueue(label: "tests.mark.own")
    let other = DispatchQueue(label: "tests.mark.other")
    #expect(!QueueMark.isCurrent(queue))
    #expect(queue.sync { QueueMark.isCurrent(queue) })
    #expect(!other.sync { QueueMark.isCurrent(queue) })
    #expect(!queue.sync { QueueMark.isCurrent(other) })
  }

  @Test func twoObjectsForTheSameGlobalQueueShareOneMark() {
    // On Linux each `global(qos:)` call returns a new wrapper object for the same queue.
    let first = DispatchQueue.global(qos: .utility)
    let second = DispatchQueue.global(qos: .utility)
    #expect(QueueMark.mark(of: first) == QueueMark.mark(of: second))
    #expect(QueueMark.mark(of: first) != QueueMark.mark(of: .global(qos: .background)))
    let seen = DispatchSemaphore(value: 0)
    let current = Guarded(false)
    first.async {
      current.value = QueueMark.isCurrent(DispatchQueue.global(qos: .utility))
      seen.signal()
    }
    #expect(seen.wait(timeout: .now() + 10) == .success)
    #expect(current.value)
  }

  @Test func theMainQueueKeepsOneMarkAndIsNotCurrentOnAnotherQueue() {
    let mark = QueueMark.mark(of: .main)
    #expect(QueueMark.mark(of: DispatchQueue.main) == mark)
    let queue = DispatchQueue(label: "tests.mark.not-main")
    #expect(!queue.sync { QueueMark.isCurrent(.main) })
    #expect(mark != QueueMark.mark(of: queue))
  }

  @Test func aBlockOnAQueueTargetingAMarkedQueueRunsTheTarget() {
    let target = DispatchQueue(label: "tests.mark.target")
    let inner = DispatchQueue(label: "tests.mark.inner", target: target)
    _ = QueueMark.mark(of: target)
    #expect(inner.sync { QueueMark.isCurrent(target) })
    #expect(!target.sync { QueueMark.isCurrent(inner) })
    // Marking the inner queue (checking whether it is current does) hides the target's mark.
    #expect(inner.sync { QueueMark.isCurrent(inner) })
    withKnownIssue("a marked queue hides the mark of the queue it targets") {
      #expect(inner.sync { QueueMark.isCurrent(target) })
    }
  }

  @Test func aQueueTargetingAMarkedQueueIsCurrentInsideItsBlocksTheFirstTimeItIsChecked() {
    let target = DispatchQueue(label: "tests.mark.marked-target")
    _ = QueueMark.mark(of: target)
    let inner = DispatchQueue(label: "tests.mark.unmarked-inner", target: target)
    // The first check marks `inner` from inside its own block: it must not see the target's.
    #expect(inner.sync { QueueMark.isCurrent(inner) })
  }

  /// Creates and marks a queue, then releases it; returns its mark.
  @inline(never)
  private func markOfAReleasedQueue(_ index: Int) -> (mark: UInt64, wasUnmarked: Bool) {
    let queue = DispatchQueue(label: "tests.mark.short-lived.\(index)")
    let wasUnmarked = queue.getSpecific(key: QueueMark.key) == nil
    let mark = QueueMark.mark(of: queue)
    #expect(queue.sync { QueueMark.isCurrent(queue) })
    return (mark, wasUnmarked)
  }

  @Test func aNewQueueNeverInheritsTheMarkOfAReleasedOne() {
    // New queues often reuse the memory of released ones: their marks must differ anyway.
    var marks: Set<UInt64> = []
    for index in 0..<200 {
      let (mark, wasUnmarked) = markOfAReleasedQueue(index)
      #expect(wasUnmarked)
      #expect(marks.insert(mark).inserted)
    }
  }

  @Test func queuesMarkedFromManyThreadsAtOnceGetOneMarkEach() {
    let queues = (0..<16).map { DispatchQueue(label: "tests.mark.concurrent.\($0)") }
    let seen = Guarded<[Int: Set<UInt64>]>([:])
    DispatchQueue.concurrentPerform(iterations: 64) { iteration in
      let index = iteration % queues.count
      let mark = QueueMark.mark(of: queues[index])
      seen.withLock { $0[index, default: []].insert(mark) }
    }
    // Two threads marking one queue at once may each draw a number; both then read one.
    for (index, queue) in queues.enumerated() {
      let mark = QueueMark.mark(of: queue)
      #expect(queue.sync { QueueMark.isCurrent(queue) })
      #expect(seen.value[index]?.contains(mark) == true)
    }
  }
}
