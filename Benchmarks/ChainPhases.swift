import Dispatch
import Promises
import Synchronization

/// The `chain` workload taken apart: where a sample's time goes, for the promise chain and for
/// the hand-written Dispatch chain, measured in the same run.
///
/// A sample of `chain` is not only its links. Both chains start on a queue whose thread is
/// asleep, so the first link or hop waits for that thread to wake; both end with a thread asleep
/// in a wait (the promise's `wait` polls for 50 µs, then blocks), which the last one must wake.
/// On the 2-vCPU machine of Docs/Performance.md a wake-up took from a few µs to about 30, as long
/// as 50 to 500 links, varying from run to run. Here each sample records the time at which the
/// first and the last link (or hop) ran, so the phases can be told apart:
///
/// - build: making the links (promise only; a Dispatch hop makes its successor as it runs);
/// - start: from fulfilling the head (or the first `queue.async`) to the first link running;
/// - links: from the first link to the last, divided by the steps between them (links − 1);
/// - end: from the last link to the waiting thread returning with the value.
///
/// Each round takes one sample of each chain, in a random order, as `chain`'s rounds do.
enum ChainPhases {
  /// One sample's phases, in nanoseconds.
  struct Sample {
    var build: Double
    var start: Double
    var links: Double
    var end: Double
    var total: Double { build + start + links + end }
  }

  /// When the first and the last link of the running sample ran.
  private static let first = Atomic<UInt64>(0)
  private static let last = Atomic<UInt64>(0)

  private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

  /// Runs `warmups` then `samples` rounds, each with one sample of each chain, `links` links long.
  static func measure(links: Int, samples: Int, warmups: Int) throws -> (
    promise: [Sample], dispatch: [Sample]
  ) {
    precondition(links >= 2, "the phases need a first and a last link")
    var promise: [Sample] = []
    var dispatch: [Sample] = []
    var generator = SystemRandomNumberGenerator()
    for round in 0..<(warmups + samples) {
      // A sample is affected by the one before it (which threads are awake): no fixed order.
      let promiseSample: Sample
      let dispatchSample: Sample
      if Bool.random(using: &generator) {
        promiseSample = try promiseChain(links: links)
        dispatchSample = try dispatchChain(links: links)
      } else {
        dispatchSample = try dispatchChain(links: links)
        promiseSample = try promiseChain(links: links)
      }
      if round >= warmups {
        promise.append(promiseSample)
        dispatch.append(dispatchSample)
      }
    }
    return (promise, dispatch)
  }

  /// The `chain/promise` case, with the first and last links noting the time.
  private static func promiseChain(links: Int) throws -> Sample {
    let start = now()
    let (head, resolver) = Promise<Int>.pending()
    var tail = head.map(on: callbackQueue) { value in
      first.store(now(), ordering: .relaxed)
      return value + 1
    }
    for _ in 1..<(links - 1) { tail = tail.map(on: callbackQueue) { value in value + 1 } }
    tail = tail.map(on: callbackQueue) { value in
      last.store(now(), ordering: .relaxed)
      return value + 1
    }
    let built = now()
    resolver.fulfill(0)
    let value = try tail.wait(timeout: waitLimitSeconds)
    let end = now()
    guard value == links else { throw BenchmarkFailure("the promise chain returned \(value), not \(links)") }
    return sample(start: start, built: built, end: end)
  }

  /// The `chain/dispatch` case, with the first and last hops noting the time.
  private static func dispatchChain(links: Int) throws -> Sample {
    let start = now()
    let completion = Completion()
    timedHop(remaining: links, of: links, value: 0, finish: completion)
    let value = try completion.wait()
    let end = now()
    guard value == links else { throw BenchmarkFailure("the Dispatch chain returned \(value), not \(links)") }
    return sample(start: start, built: start, end: end)
  }

  /// `dispatchHop`, with the first and last hops noting the time.
  private static func timedHop(remaining: Int, of links: Int, value: Int, finish: Completion) {
    if remaining == 0 {
      finish.complete(value)
      return
    }
    baselineQueue.async {
      if remaining == links { first.store(now(), ordering: .relaxed) }
      if remaining == 1 { last.store(now(), ordering: .relaxed) }
      timedHop(remaining: remaining - 1, of: links, value: value + 1, finish: finish)
    }
  }

  private static func sample(start: UInt64, built: UInt64, end: UInt64) -> Sample {
    let firstRan = first.load(ordering: .relaxed)
    let lastRan = last.load(ordering: .relaxed)
    return Sample(
      build: Double(built &- start), start: Double(firstRan &- built), links: Double(lastRan &- firstRan),
      end: Double(end &- lastRan))
  }

  /// The report: medians per phase for both chains, per sample and per link.
  static func report(links: Int, promise: [Sample], dispatch: [Sample]) -> String {
    /// The nearest-rank median, as the tables' (`Measurement.median`).
    func median(_ values: [Double]) -> Double? {
      values.isEmpty ? nil : values.sorted()[(values.count + 1) / 2 - 1]
    }
    func microseconds(_ nanoseconds: Double?) -> String {
      Report.format(nanoseconds.map { $0 / 1_000 }, digits: 1)
    }
    let between = Double(links - 1)
    /// A link's own work: its share of building, plus its share of running the links.
    func linkWork(_ samples: [Sample]) -> Double? {
      median(samples.map(\.build)).flatMap { build in
        median(samples.map(\.links)).map { build / Double(links) + $0 / between }
      }
    }
    func row(_ name: String, _ samples: [Sample], built: Bool) -> [String] {
      [
        name, built ? microseconds(median(samples.map(\.build))) : "—",
        microseconds(median(samples.map(\.start))),
        Report.format(median(samples.map(\.links)).map { $0 / between }, digits: 1),
        microseconds(median(samples.map(\.end))), microseconds(median(samples.map(\.total))),
        Report.format(linkWork(samples), digits: 1),
      ]
    }
    let columns = ["case", "build µs", "start µs", "links ns/link", "end µs", "total µs", "link work ns"]
    let startAndEnd = { (samples: [Sample]) in median(samples.map { $0.start + $0.end }) }
    let workRatio = linkWork(promise).flatMap { promise in linkWork(dispatch).map { promise / $0 } }
    let lines =
      [
        "== chain, phase by phase: medians of \(promise.count) sample\(promise.count == 1 ? "" : "s") of each chain, in rounds ==",
        "build: making the links; start: until the first link runs; links: per link from the first to the",
        "last; end: from the last link until `wait` returns; link work: build ÷ links + links (ns per link)",
      ]
      + Report.render([
        columns, row("promise", promise, built: true), row("dispatch", dispatch, built: false),
      ])
      + [
        "link work, promise ÷ dispatch: \(Report.format(workRatio, digits: 2)); start + end (two thread "
          + "wake-ups): promise \(microseconds(startAndEnd(promise))) µs, dispatch "
          + "\(microseconds(startAndEnd(dispatch))) µs per sample"
      ]
    return lines.joined(separator: "\n") + "\n"
  }
}
