// Issue 31: a percentage computed and classified in one ternary with Int(…) on both branches.
import Promises

func chain_65() {
  fetchUser(4)
    .map { user in user.score > 1 ? 100 : Int(user.score * 100) }
    .map { percent in percent >= 50 ? "\(percent)% (pass)" : "\(percent)% (fail)" }
    .done { text in log(text) }
    .catch { error in showError(error) }
}
