/// Parses the arguments, runs the selected cases and prints the results.
enum BenchmarkCommand {
  /// Returns the process exit status.
  static func run(_ arguments: [String]) -> Int32 {
    let options: Options
    switch Options.parse(arguments) {
    case .success(let parsed): options = parsed
    case .failure(let error):
      if let message = error.message { printError("error: \(message)") }
      printError(Options.usage)
      return error.message == nil ? 0 : 2
    }

    if !isOptimized { printError(Report.debugBanner) }

    let plan = Plan(smoke: options.smoke, samplesOverride: options.samples)
    let all = plan.allCases()
    // A full case name selects just that case ("chain/promise", not also "deep-chain/promise").
    let exact = all.filter { $0.name == options.filter }
    let cases =
      exact.isEmpty
      ? all.filter { benchCase in options.filter.map { benchCase.name.contains($0) } ?? true } : exact
    guard !cases.isEmpty else {
      printError("error: no case matches --filter \(options.filter ?? "")")
      return 1
    }

    // Human-readable output goes to stdout, or to stderr when stdout carries the JSON.
    let say: (String) -> Void = { line in
      if options.json { printError(line) } else { print(line) }
    }
    for line in Report.header(cases, options: options) { say(line) }
    say("")

    var measurements: [Measurement] = []
    var phaseFailures: [String] = []
    for group in groupedConsecutively(cases, by: \.workload.name) {
      let workload = group[0].workload
      printError(
        "  running \(workload.name): \(group.map(\.variant).joined(separator: ", ")) "
          + "(interleaved, \(workload.samples) samples) …")
      let groupMeasurements = Runner.run(
        group, samples: workload.samples, warmups: workload.warmups,
        budget: options.samples == nil ? .seconds(Options.caseBudgetSeconds) : nil)
      say(Report.table(groupMeasurements))
      measurements += groupMeasurements
      if workload.name == "chain" {
        // Where a sample's time goes: the links, and the two thread wake-ups around them.
        do {
          let phases = try ChainPhases.measure(
            links: workload.units, samples: workload.samples, warmups: workload.warmups)
          say(ChainPhases.report(links: workload.units, promise: phases.promise, dispatch: phases.dispatch))
        } catch {
          phaseFailures.append("\(error)")
        }
      }
    }

    // The transfer workload's files (1 GiB each in a full run).
    TransferScratch.removeAll()

    let checksum = measurements.reduce(0) { $0 &+ $1.checksum }
    say("checksum: \(checksum)")
    if options.json { print(Report.json(measurements)) }

    let failures = measurements.filter { $0.failure != nil }
    for failure in failures {
      printError("FAILED \(failure.benchCase.name): \(failure.failure ?? "")")
    }
    for failure in phaseFailures { printError("FAILED chain phases: \(failure)") }
    if !isOptimized { printError(Report.debugBanner) }
    return failures.isEmpty && phaseFailures.isEmpty ? 0 : 1
  }
}
