// Throwing value step written as one expression (try), then a promise step and a value step.
import Promises

func chain_14() {
  Promise("42")
    .map { text in try parseID(text) }
    .then { id in fetchUser(id) }
    .map { user in user.name }
    .catch { error in showError(error) }
}
