// Docs/Chaining.md's first example (dictionary literal, ??, Double(...)) plus one division step.
import Promises

func chain_08() {
  let frameTime = Promise(["bitrate": 2_500, "fps": 30])
    .map { config in config["fps"] ?? 25 }
    .map { fps in Double(fps) }
    .map { fps in 1_000 / fps }
  frameTime.catch { error in showError(error) }
}
