// Value ?? step, then promise steps adopting fetchUser / fetchFriends, then map + joined.
import Promises

func chain_22() {
  Promise("42")
    .then { text in Int(text) ?? 0 }
    .then { id in fetchUser(id) }
    .then { user in fetchFriends(of: user) }
    .then { friends in friends.map(\.name).joined(separator: ", ") }
    .then { names in print("friends: \(names)") }
    .catch { error in showError(error) }
}
