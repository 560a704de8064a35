/// Sizes and sample counts of every workload, full or smoke.
struct Plan {
  let smoke: Bool
  let samplesOverride: Int?

  /// Builds a workload: `units` is (full, smoke); smoke runs once with no warm-up.
  func workload(
    _ name: String, _ title: String, unit: String, units: (full: Int, smoke: Int), samples: Int,
    measuresPeakMemory: Bool = false
  ) -> Workload {
    let sampleCount: Int
    let warmups: Int
    if smoke {
      sampleCount = 1
      warmups = 0
    } else if measuresPeakMemory {
      // Each sample takes seconds: `--samples` may lower the count but not raise it.
      sampleCount = min(samplesOverride ?? samples, samples)
      warmups = 1
    } else {
      sampleCount = samplesOverride ?? samples
      warmups = max(2, sampleCount / 10)
    }
    return Workload(
      name: name, title: title, unit: unit, units: smoke ? units.smoke : units.full, samples: sampleCount,
      warmups: warmups, measuresPeakMemory: measuresPeakMemory)
  }

  /// Every case, grouped by workload, in run order. The deep chain is LAST: it measures peak
  /// resident memory, which is process-wide.
  func allCases() -> [BenchCase] {
    var cases = oneLinkCases()
    cases += chainCases()
    cases += resolvedThenCases()
    cases += allCombinatorCases()
    cases += contentionCases()
    cases += fanOutCases()
    cases += httpCases()
    cases += transferCases()
    cases += externalHTTPSCases()
    cases += deepChainCases()
    return cases
  }
}

/// Σ i for i in 0..<count.
func sumBelow(_ count: Int) -> Int { count * (count - 1) / 2 }
