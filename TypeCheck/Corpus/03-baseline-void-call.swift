// Baseline: one Void step (a call returning nothing), ended by catch.
import Promises

func chain_03() {
  fetchUser(42)
    .done { user in log(user.name) }
    .catch { error in showError(error) }
}
