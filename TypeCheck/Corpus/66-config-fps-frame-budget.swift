// Issue 31: Failing/03 fixed: the step whose input type the solver must guess (Int(…) of a
// division) gets its parameter type, found with -warn-long-expression-type-checking.
import Promises

func chain_66() {
  loadConfig(from: "backup")
    .map { config in Double(config["fps"] ?? 30) }
    .map { fps in 1_000 / fps }
    .map { (frameMs: Double) in Int(frameMs / 16.7 * 100) }
    .done { percent in log("frame budget \(percent)%") }
    .catch { error in showError(error) }
}
