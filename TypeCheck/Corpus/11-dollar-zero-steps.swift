// Anonymous $0 closures: value steps with arithmetic, then a Void print.
import Promises

func chain_11() {
  fetchUser(1)
    .map { $0.friendIDs.count + 1 }
    .map { $0 * 2 }
    .done { print("slots: \($0)") }
    .catch { print("failed: \($0)") }
}
