import Foundation

/// The command-line options of the benchmark executable.
struct Options {
  var filter: String?
  var json = false
  var smoke = false
  var samples: Int?

  /// Without `--samples`, a case stops taking samples after this long (but takes at least 5), so
  /// that a slow implementation cannot stretch the full run far beyond a few minutes.
  static let caseBudgetSeconds: Double = 8

  static let usage = """
    usage: Benchmarks [--filter SUBSTRING] [--json] [--smoke] [--samples N]
      --filter SUBSTRING  run only the cases whose name (workload/variant) contains SUBSTRING;
                          a full name (chain/promise) runs just that case
      --json              print a JSON array of results on stdout (progress goes to stderr)
      --smoke             run every case once with tiny sizes (CI: proves the executable completes)
      --samples N         exactly N timed samples per case (deep-chain: at most its default of 3);
                          without it, a case stops sampling after ~\(Int(caseBudgetSeconds)) s
                          once it has 5 samples
    """

  /// Parses the arguments (without the executable name); returns an error message on bad input.
  static func parse(_ arguments: [String]) -> Result<Options, OptionsError> {
    var options = Options()
    var rest = arguments[...]
    while let argument = rest.popFirst() {
      switch argument {
      case "--json": options.json = true
      case "--smoke": options.smoke = true
      case "--filter":
        guard let value = rest.popFirst() else { return .failure(OptionsError("--filter needs a value")) }
        options.filter = value
      case "--samples":
        guard let value = rest.popFirst(), let count = Int(value), count > 0 else {
          return .failure(OptionsError("--samples needs a positive integer"))
        }
        options.samples = count
      case "--help", "-h": return .failure(OptionsError(nil))
      default: return .failure(OptionsError("unknown argument '\(argument)'"))
      }
    }
    return .success(options)
  }
}

struct OptionsError: Error {
  /// nil when the user asked for help.
  let message: String?
  init(_ message: String?) { self.message = message }
}

/// What one workload does, how big it is and how often it is sampled.
struct Workload {
  let name: String
  /// One line shown above the workload's table.
  let title: String
  /// What one unit is ("op", "link", "element", "promise").
  let unit: String
  /// Units of work in one timed sample.
  let units: Int
  let samples: Int
  let warmups: Int
  /// Whether the peak resident memory of each sample is measured (deep chain, transfers).
  var measuresPeakMemory = false
  /// The most the peak resident memory may grow in one sample: a sample above it fails the
  /// case (its timings are still reported). `nil`: no limit.
  var memoryLimitBytes: Int?
  /// The variants held to `memoryLimitBytes` (all when `nil`): the library's, not a reference
  /// such as bare `URLSession`, whose growth is reported only.
  var memoryLimitedVariants: Set<String>?
  /// Bytes moved per unit, for a throughput column (MB/s); `nil` for workloads that move none.
  var bytesPerUnit: Int?
  /// The variant ratios are computed against: the hand-written Dispatch chain, except for
  /// HTTP, where the baseline is the same requests written with raw `URLSession`, and for
  /// transfers, where it is curl (each case names its own curl case, see `BenchCase.baseline`).
  var baselineVariant = "dispatch"
}

/// One timed run of a case, made by its untimed setup.
struct TimedRun {
  /// The timed work; returns the value every run must return.
  let body: () throws -> Int
  /// Untimed, after the body and the memory reading: checks what the body produced beyond
  /// its value (a file's content, what a server received) and removes what it left; throws
  /// a `BenchmarkFailure` on a mismatch.
  var verify: (() throws -> Void)?
}

/// One measured case: a workload run by one implementation (our promise or a baseline).
struct BenchCase {
  let workload: Workload
  /// "promise", "promise-default", "inline", "dispatch", "async-…".
  let variant: String
  /// The value every timed run must return (derived from the work; also summed into the checksum).
  let expected: Int
  /// The variant of the same workload this case's ratio is computed against.
  let baseline: String
  /// Untimed setup; returns the timed run.
  let prepareRun: () throws -> TimedRun

  var name: String { "\(workload.name)/\(variant)" }

  /// A case whose setup returns the timed body, compared with the workload's baseline.
  init(workload: Workload, variant: String, expected: Int, prepare: @escaping () throws -> () throws -> Int) {
    self.workload = workload
    self.variant = variant
    self.expected = expected
    self.baseline = workload.baselineVariant
    self.prepareRun = { TimedRun(body: try prepare()) }
  }

  /// A case whose setup returns a timed body and an untimed check, compared with `baseline`.
  init(
    workload: Workload, variant: String, baseline: String, expected: Int,
    prepareRun: @escaping () throws -> TimedRun
  ) {
    self.workload = workload
    self.variant = variant
    self.expected = expected
    self.baseline = baseline
    self.prepareRun = prepareRun
  }
}

/// Peak resident memory of one case.
struct MemoryStats {
  /// Largest VmHWM seen after a sample (bytes).
  var peakBytes: Int
  /// Largest growth of VmHWM over VmRSS at the start of a sample (bytes).
  var growthBytes: Int
}

/// The result of running one case.
struct Measurement {
  let benchCase: BenchCase
  /// Nanoseconds per unit, one per sample, sorted ascending.
  let nanosecondsPerUnit: [Double]
  let checksum: Int
  let memory: MemoryStats?
  let failure: String?

  var median: Double? { percentile(0.5) }
  var p90: Double? { percentile(0.9) }

  /// Nearest-rank percentile of the samples.
  func percentile(_ fraction: Double) -> Double? {
    guard !nanosecondsPerUnit.isEmpty else { return nil }
    let rank = Int((fraction * Double(nanosecondsPerUnit.count)).rounded(.up))
    return nanosecondsPerUnit[min(max(rank, 1), nanosecondsPerUnit.count) - 1]
  }
}

/// Runs the cases of one workload: warm-up, then timed samples, interleaved in rounds.
///
/// Interleaving (sample 1 of every case, then sample 2 of every case, …) spreads the drift of a
/// shared, noisy machine over all the cases of a workload instead of penalising whichever case
/// happened to run while something else was busy; ratios within a workload stay comparable.
/// Each round runs the cases in a new, shuffled order: a sample depends on the one before it
/// (which threads are awake, whose cache holds the memory the allocator hands out next), and
/// in a fixed order every case always followed the same neighbour. Measured on the `chain`
/// workload: the same `promise` case was 0.80×–0.87× of `dispatch` right after another promise
/// case and 0.86×–1.05× right after `async-yield`.
enum Runner {
  /// Runs `warmups` untimed runs of each case, then up to `samples` timed ones. With a `budget`,
  /// a case stops sampling once it has `minimumSamples` and its samples took longer than that.
  static func run(
    _ cases: [BenchCase], samples: Int, warmups: Int, budget: Duration?, minimumSamples: Int = 5
  ) -> [Measurement] {
    var runs = cases.map { CaseRun(benchCase: $0) }
    for _ in 0..<warmups {
      for index in runs.indices { runs[index].warmUp() }
    }
    var order = Array(runs.indices)
    for sample in 0..<samples {
      order.shuffle()
      for index in order {
        if let budget, sample >= minimumSamples, runs[index].timeSpent > budget { continue }
        runs[index].takeSample()
      }
    }
    return runs.map(\.measurement)
  }
}

/// The samples of one case so far; after a failure the case takes no more samples.
private struct CaseRun {
  let benchCase: BenchCase
  var perUnit: [Double] = []
  var checksum = 0
  var memory: MemoryStats?
  var failure: String?
  /// A sample whose memory grew beyond the workload's limit: the case fails, but keeps sampling
  /// so that its figures are complete.
  var memoryFailure: String?
  /// Wall time spent taking samples (setup included).
  var timeSpent = Duration.zero

  init(benchCase: BenchCase) { self.benchCase = benchCase }

  var measurement: Measurement {
    Measurement(
      benchCase: benchCase, nanosecondsPerUnit: perUnit.sorted(), checksum: checksum, memory: memory,
      failure: failure ?? memoryFailure)
  }

  mutating func warmUp() {
    guard failure == nil else { return }
    do {
      let run = try benchCase.prepareRun()
      let value = try run.body()
      try run.verify?()
      try check(value)
    } catch {
      failure = "\(error)"
    }
  }

  mutating func takeSample() {
    guard failure == nil else { return }
    let clock = ContinuousClock()
    let sampleStart = clock.now
    defer { timeSpent += clock.now - sampleStart }
    let measuresMemory = benchCase.workload.measuresPeakMemory
    do {
      let run = try benchCase.prepareRun()
      var startRSS = 0
      if measuresMemory {
        ProcessMemory.returnFreeMemoryToSystem()
        ProcessMemory.resetPeak()
        startRSS = ProcessMemory.residentBytes() ?? 0
      }
      let start = clock.now
      let value = try run.body()
      let elapsed = clock.now - start
      var growth: Int?
      if measuresMemory, let peak = ProcessMemory.peakResidentBytes() {
        growth = max(0, peak - startRSS)
        memory = MemoryStats(
          peakBytes: max(memory?.peakBytes ?? 0, peak),
          growthBytes: max(memory?.growthBytes ?? 0, growth ?? 0))
      }
      try run.verify?()
      try check(value)
      checksum &+= value
      perUnit.append(elapsed.nanoseconds / Double(benchCase.workload.units))
      if let limit = benchCase.workload.memoryLimitBytes, let growth, growth > limit,
        benchCase.workload.memoryLimitedVariants?.contains(benchCase.variant) ?? true
      {
        let worst = memory?.growthBytes ?? growth
        memoryFailure = String(
          format: "peak RSS grew by up to %.1f MiB in a sample, above the limit of %.0f MiB",
          Double(worst) / 1_048_576, Double(limit) / 1_048_576)
      }
    } catch {
      failure = "\(error)"
    }
  }

  private func check(_ value: Int) throws {
    guard value == benchCase.expected else {
      throw BenchmarkFailure("\(benchCase.name) returned \(value), expected \(benchCase.expected)")
    }
  }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}

extension Duration {
  var nanoseconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) * 1e9 + Double(attoseconds) / 1e9
  }
}

/// Writes a line to standard error.
func printError(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Splits `items` into runs of consecutive elements with the same key, keeping their order.
func groupedConsecutively<Item>(_ items: [Item], by key: (Item) -> String) -> [[Item]] {
  var groups: [[Item]] = []
  for item in items {
    if let last = groups.last?.last, key(last) == key(item) {
      groups[groups.count - 1].append(item)
    } else {
      groups.append([item])
    }
  }
  return groups
}
