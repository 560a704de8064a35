// Docs/Design.md's operator chain: $0 + 1, $0 * 2, Promise(value * 2), $0 - 3 on an Int literal.
import Promises

func chain_49() {
  Promise(1)
    .map { $0 + 1 }
    .map { $0 * 2 }
    .then { value in Promise(value * 2) }
    .map { $0 - 3 }
    .catch { error in showError(error) }
}
