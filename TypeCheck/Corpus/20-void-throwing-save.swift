// Throwing Void step, one expression (try save), then a step on Promise<Void> with no parameter.
import Promises

func chain_20() {
  fetchUser(9)
    .then { user in try save(user) }
    .then { log("saved") }
    .catch { error in showError(error) }
}
