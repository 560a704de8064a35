// Promise.any over two loadConfig calls (Docs/Combining.md), ?? step, then a Void print.
import Promises

func chain_53() {
  Promise.any([loadConfig(from: "primary"), loadConfig(from: "backup")])
    .map { config in config["fps"] ?? 0 }
    .done { fps in print("fps \(fps)") }
    .catch { error in showError(error) }
}
