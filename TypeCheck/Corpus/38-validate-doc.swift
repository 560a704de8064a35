// Docs/Chaining.md's validate (a comparison), then a Double division and a Void step.
import Promises

func chain_38() {
  Promise(50_000)
    .validate { bitrate in bitrate <= 20_000 }
    .map { bitrate in Double(bitrate) / 1_000 }
    .done { megabits in print("\(megabits) Mbit/s") }
    .catch { error in showError(error) }
}
