import Foundation

#if DEBUG
  let isOptimized = false
#else
  let isOptimized = true
#endif

/// Formats measurements as a human-readable table or as JSON.
enum Report {
  static let debugBanner = """

    ##########################################################################################
    ##  WARNING: Benchmarks was built WITHOUT optimisation (debug build).                   ##
    ##  Every number below is MEANINGLESS. Use:  swift run -c release Benchmarks            ##
    ##########################################################################################

    """

  /// Lines describing the run: build, sizes, how peak memory is measured.
  static func header(_ cases: [BenchCase], options: Options) -> [String] {
    var lines = [
      "Promises benchmarks — \(isOptimized ? "release (optimised)" : "DEBUG (unoptimised)") build"
        + (options.smoke ? ", SMOKE mode (tiny sizes, one sample: timings are meaningless)" : ""),
      "ns per unit: median and p90 over the samples (taken in rounds across a workload's cases, each round shuffled); "
        + "× dispatch = median ÷ the same workload's `dispatch` median (same run).",
    ]
    if let load = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) {
      let averages = load.split(separator: " ").prefix(3).joined(separator: " ")
      lines.append(
        "load average at start: \(averages) on \(ProcessInfo.processInfo.activeProcessorCount) CPUs "
          + "(other work on the machine makes every number noisier)")
    }
    let measured = cases.filter(\.workload.measuresPeakMemory).map(\.workload.name)
    if !measured.isEmpty {
      let method =
        ProcessMemory.canResetPeak
        ? "VmHWM reset before each sample via /proc/self/clear_refs, minus VmRSS at its start"
        : "VmHWM is not resettable here: growth over the process-wide peak so far (a lower bound)"
      let names = measured.reduce(into: [String]()) { names, name in
        if names.last != name { names.append(name) }
      }
      lines.append(
        "peak RSS growth per sample (\(names.joined(separator: ", ")); deep-chain runs LAST): \(method); "
          + "worst sample shown.")
    }
    return lines
  }

  /// The table of one workload's cases.
  static func table(_ measurements: [Measurement]) -> String {
    guard let workload = measurements.first?.benchCase.workload else { return "" }
    let unit = workload.unit
    var columns = ["case", "median ns/\(unit)", "p90 ns/\(unit)", "× \(workload.baselineVariant)", "samples"]
    if workload.bytesPerUnit != nil { columns += ["MB/s", "MB/s ÷ \(workload.baselineVariant)"] }
    if workload.measuresPeakMemory { columns += ["peak RSS growth"] }
    if workload.measuresPeakMemory && workload.bytesPerUnit == nil { columns += ["bytes/\(unit)"] }
    var rows: [[String]] = []
    for measurement in measurements {
      let baseline = baselineMedian(for: measurement, in: measurements)
      var row = [
        measurement.benchCase.variant,
        format(measurement.median, digits: 1),
        format(measurement.p90, digits: 1),
        format(ratio(measurement, baseline), digits: 2),
        "\(measurement.nanosecondsPerUnit.count)",
      ]
      if workload.bytesPerUnit != nil {
        row.append(format(megabytesPerSecond(measurement), digits: 0))
        row.append(format(ratio(measurement, baseline).map { 1 / $0 }, digits: 2))
      }
      if workload.measuresPeakMemory {
        let growth = measurement.memory?.growthBytes
        row.append(growth.map { String(format: "%.1f MiB", Double($0) / 1_048_576) } ?? "—")
        if workload.bytesPerUnit == nil {
          row.append(format(growth.map { Double($0) / Double(workload.units) }, digits: 1))
        }
      }
      if let failure = measurement.failure { row.append("FAILED: \(failure)") }
      rows.append(row)
    }
    let title =
      "== \(workload.name): \(workload.title) — \(workload.units.formatted()) \(unit)s per sample =="
    return ([title] + render([columns] + rows)).joined(separator: "\n") + "\n"
  }

  /// The JSON array of all measurements, one object per case with its keys in a fixed order;
  /// absent values are `null`, so every object has the same keys.
  static func json(_ measurements: [Measurement]) -> String {
    var objects: [String] = []
    for group in groupedConsecutively(measurements, by: \.benchCase.workload.name) {
      for measurement in group {
        let baseline = baselineMedian(for: measurement, in: group)
        let workload = measurement.benchCase.workload
        let growth = measurement.memory?.growthBytes
        let perLink = workload.bytesPerUnit == nil ? growth.map { Double($0) / Double(workload.units) } : nil
        let fields: [(String, JSON)] = [
          ("name", .string(measurement.benchCase.name)),
          ("workload", .string(workload.name)),
          ("variant", .string(measurement.benchCase.variant)),
          ("unit", .string(workload.unit)),
          ("units_per_sample", .integer(workload.units)),
          ("median_ns", .number(measurement.median, digits: 2)),
          ("p90_ns", .number(measurement.p90, digits: 2)),
          ("baseline", .string(measurement.benchCase.baseline)),
          ("ratio_to_baseline", .number(ratio(measurement, baseline), digits: 3)),
          ("samples", .integer(measurement.nanosecondsPerUnit.count)),
          ("checksum", .integer(measurement.checksum)),
          ("peak_rss_bytes", measurement.memory.map { .integer($0.peakBytes) } ?? .null),
          ("peak_rss_growth_bytes", growth.map { .integer($0) } ?? .null),
          ("bytes_per_link", .number(perLink, digits: 1)),
          ("optimized", .boolean(isOptimized)),
          ("error", measurement.failure.map { .string($0) } ?? .null),
          ("megabytes_per_second", .number(megabytesPerSecond(measurement), digits: 1)),
          ("throughput_ratio_to_baseline", .number(ratio(measurement, baseline).map { 1 / $0 }, digits: 3)),
        ]
        let body = fields.map { key, value in "    \(JSON.quote(key)): \(value.text)" }
        objects.append("  {\n" + body.joined(separator: ",\n") + "\n  }")
      }
    }
    return "[\n" + objects.joined(separator: ",\n") + "\n]"
  }

  /// A JSON scalar, written by hand so that keys keep their order.
  private enum JSON {
    case string(String)
    case integer(Int)
    case number(Double?, digits: Int)
    case boolean(Bool)
    case null

    var text: String {
      switch self {
      case .string(let value): return JSON.quote(value)
      case .integer(let value): return String(value)
      case .number(let value?, let digits) where value.isFinite: return String(format: "%.\(digits)f", value)
      case .number: return "null"
      case .boolean(let value): return value ? "true" : "false"
      case .null: return "null"
      }
    }

    static func quote(_ string: String) -> String {
      var quoted = "\""
      for scalar in string.unicodeScalars {
        switch scalar {
        case "\"": quoted += "\\\""
        case "\\": quoted += "\\\\"
        case "\n": quoted += "\\n"
        case "\r": quoted += "\\r"
        case "\t": quoted += "\\t"
        case _ where scalar.value < 0x20: quoted += String(format: "\\u%04x", scalar.value)
        default: quoted.unicodeScalars.append(scalar)
        }
      }
      return quoted + "\""
    }
  }

  /// The median of the case `measurement` is compared with (the workload's `dispatch`, or the
  /// case's own baseline), unless that case failed.
  private static func baselineMedian(for measurement: Measurement, in measurements: [Measurement]) -> Double?
  {
    measurements.first {
      $0.benchCase.variant == measurement.benchCase.baseline && $0.failure == nil
    }?.median
  }

  /// Decimal megabytes per second at the median, for workloads that move bytes.
  private static func megabytesPerSecond(_ measurement: Measurement) -> Double? {
    guard let bytes = measurement.benchCase.workload.bytesPerUnit, let median = measurement.median, median > 0
    else { return nil }
    // bytes per nanosecond = GB/s.
    return Double(bytes) / median * 1_000
  }

  private static func ratio(_ measurement: Measurement, _ baseline: Double?) -> Double? {
    guard let median = measurement.median, let baseline, baseline > 0 else { return nil }
    return median / baseline
  }

  static func format(_ value: Double?, digits: Int) -> String {
    guard let value else { return "—" }
    return String(format: "%.\(digits)f", value)
  }

  /// Left-aligns the first column and right-aligns the others.
  static func render(_ rows: [[String]]) -> [String] {
    let columnCount = rows.map(\.count).max() ?? 0
    var widths = [Int](repeating: 0, count: columnCount)
    for row in rows {
      for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
    }
    return rows.map { row in
      row.enumerated().map { index, cell in
        let padding = String(repeating: " ", count: widths[index] - cell.count)
        return index == 0 ? cell + padding : padding + cell
      }.joined(separator: "  ")
    }
  }
}
