// expect-error: 'done' for one that returns nothing
// A Void closure of several statements handed to then, followed by catch.
import PromiseHTTP
import Promises

func misuse_08() {
  fetchSettings()
    .then { settings in
      log("theme \(settings.theme)")
      analytics.track("settings", ["muted": "\(settings.muted)"])
    }
    .catch { error in showError(error) }
}
