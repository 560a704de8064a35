// Void step, one expression: print with interpolation of a count.
import Promises

func chain_15() {
  fetchUser(5)
    .done { user in print("loaded \(user.name) with \(user.friendIDs.count) friends") }
    .catch { error in print("failed: \(error)") }
}
