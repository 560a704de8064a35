// Issue 31: filter, map and reduce inside one value step, then a ternary and a Void step.
import Promises

func chain_59() {
  fetchUser(1)
    .then { user in fetchFriends(of: user) }
    .map { friends in friends.filter { $0.score > 0.2 }.map { $0.score * 100 }.reduce(0, +) }
    .map { total in total > 50 ? "active" : "quiet" }
    .done { verdict in log("friends: \(verdict)") }
    .catch { error in showError(error) }
}
