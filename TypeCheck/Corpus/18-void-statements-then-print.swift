// Multi-statement Void step followed by `.then { value in print(value) }` (issue 22's third example).
import Promises

func chain_18() {
  fetchSettings()
    .done { settings in
      log("theme \(settings.theme)")
      analytics.track("settings", ["muted": "\(settings.muted)"])
    }
    .done { value in print(value) }
    .catch { error in showError(error) }
}
