// Empty Void step `{ _ in }` and asVoid, then always and catch.
import Promises

func chain_55() {
  fetchUser(1)
    .map { _ in }
    .always { log("done") }
    .catch { error in showError(error) }
}
