// Throwing Void step, one expression (try save), then a step on Promise<Void> with no parameter.
import Promises

func chain_20() {
  fetchUser(9)
    .done { user in try save(user) }
    .done { log("saved") }
    .catch { error in showError(error) }
}
