// Multi-statement Void step followed by `.then { value in print(value) }` (issue 22's third example).
import Promises

func chain_18() {
  fetchSettings()
    .then { settings in
      log("theme \(settings.theme)")
      analytics.track("settings", ["muted": "\(settings.muted)"])
    }
    .then { value in print(value) }
    .catch { error in showError(error) }
}
