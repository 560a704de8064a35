// Promise step, one expression: a ternary choosing between two promise-returning calls.
import Promises

func chain_23() {
  fetchUser(1)
    .then { user in user.friendIDs.isEmpty ? fetchUser(0) : fetchUser(user.friendIDs[0]) }
    .done { friend in print("first friend: \(friend.name)") }
    .catch { error in showError(error) }
}
