// Issue 31: a ternary with Int(…) on one branch and a literal on the other, then interpolation.
import Promises

func chain_60() {
  fetchSettings()
    .map { settings in settings.muted ? 0 : Int(settings.volume * 10) }
    .map { level in level == 0 ? "muted" : "level \(level)" }
    .done { text in log(text) }
    .catch { error in showError(error) }
}
