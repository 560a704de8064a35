// Baseline: one promise step that calls a function returning a promise (adoption), ended by catch.
import Promises

func chain_02() {
  fetchUser(42)
    .then { user in fetchAvatar(user) }
    .catch { error in showError(error) }
}
