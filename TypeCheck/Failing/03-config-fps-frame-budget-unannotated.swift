// expect-slow: a one-line chain that needs one annotation (Corpus/66 is the fix)
// Issue 31: dictionary values with ??, a Double division and a percentage of a frame budget.
import Promises

func failing_03() {
  loadConfig(from: "backup")
    .map { config in Double(config["fps"] ?? 30) }
    .map { fps in 1_000 / fps }
    .map { frameMs in Int(frameMs / 16.7 * 100) }
    .done { percent in log("frame budget \(percent)%") }
    .catch { error in showError(error) }
}
