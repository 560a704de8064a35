// Docs/Chaining.md's recover pair (promise, then value dictionary literal), then a ?? value step.
import Promises

func chain_34() {
  loadConfig(from: "primary")
    .recover { _ in loadConfig(from: "backup") }
    .recover { _ in ["bitrate": 1_000] }
    .map { config in config["bitrate"] ?? 0 }
    .done { bitrate in log("bitrate \(bitrate)") }
    .catch { error in showError(error) }
}
