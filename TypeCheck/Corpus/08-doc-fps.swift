// Docs/Chaining.md's first example (dictionary literal, ??, Double(...)) plus one division step.
import Promises

func chain_08() {
  let frameTime = Promise(["bitrate": 2_500, "fps": 30])
    .then { config in config["fps"] ?? 25 }
    .then { fps in Double(fps) }
    .then { fps in 1_000 / fps }
  frameTime.catch { error in showError(error) }
}
