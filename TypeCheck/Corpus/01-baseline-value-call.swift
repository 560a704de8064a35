// Baseline: one value step that reads a property, ended by catch.
import Promises

func chain_01() {
  fetchUser(42)
    .map { user in user.name }
    .catch { error in showError(error) }
}
