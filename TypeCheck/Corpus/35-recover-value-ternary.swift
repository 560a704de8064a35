// Value step then recover with a ternary on the error (is CancellationError ? 0 : -1).
import Promises

func chain_35() {
  fetchUser(1)
    .map { user in user.score }
    .recover { error in error is CancellationError ? 0 : -1 }
    .done { score in log("score \(score)") }
    .catch { error in showError(error) }
}
