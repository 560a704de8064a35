// Value steps of Double arithmetic with min/max and a ternary on a Bool, then a Void step.
import Promises

func chain_58() {
  fetchSettings()
    .map { settings in settings.muted ? 0 : min(max(settings.volume * 1.2, 0), 1) }
    .map { volume in Int(volume * 100) }
    .done { percent in log("volume \(percent)%") }
    .catch { error in showError(error) }
}
