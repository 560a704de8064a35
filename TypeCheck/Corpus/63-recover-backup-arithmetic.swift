// Issue 31: recover with a backup promise, then arithmetic on a dictionary value.
import Promises

func chain_63() {
  loadConfig(from: "primary")
    .recover { _ in loadConfig(from: "backup") }
    .map { config in (config["bitrate"] ?? 1_000) * 1_000 / 8 }
    .map { bytesPerSecond in bytesPerSecond / 1_024 }
    .done { kib in log("\(kib) KiB/s") }
    .catch { error in showError(error) }
}
