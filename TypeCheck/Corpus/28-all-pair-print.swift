// Heterogeneous Promise.all(a, b), then a Void step printing pair.0 (issue 22's second example).
import Promises

func chain_28() {
  Promise.all(fetchUser(1), fetchSettings())
    .done { pair in print(pair.0) }
    .catch { error in showError(error) }
}
