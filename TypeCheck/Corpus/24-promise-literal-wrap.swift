// Promise step wrapping a value (Docs/Chaining.md: Promise(config["bitrate"] ?? 1_000)), then arithmetic.
import Promises

func chain_24() {
  loadConfig(from: "backup")
    .then { config in Promise(config["bitrate"] ?? 1_000) }
    .map { bitrate in bitrate / 8 }
    .done { bytes in log("\(bytes) bytes per second") }
    .catch { error in showError(error) }
}
