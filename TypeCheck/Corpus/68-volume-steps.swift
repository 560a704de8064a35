// Issue 31: Double arithmetic with literals over three links, then a percentage string.
import Promises

func chain_68() {
  fetchSettings()
    .map { settings in settings.volume * 0.9 + 0.05 }
    .map { volume in volume > 1 ? 1 : volume }
    .map { volume in Int(volume * 100) }
    .done { percent in log("volume \(percent)%") }
    .catch { error in showError(error) }
}
