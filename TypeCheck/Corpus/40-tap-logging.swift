// tap to log the Result, then a ternary value step, then a Void step.
import Promises

func chain_40() {
  fetchUser(1)
    .tap { result in log("user: \(result)") }
    .map { user in user.name.count > 3 ? user.name : "anonymous" }
    .done { name in print("hello, \(name)") }
    .catch { error in showError(error) }
}
