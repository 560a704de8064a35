// Value ?? step, then promise steps adopting fetchUser / fetchFriends, then map + joined.
import Promises

func chain_22() {
  Promise("42")
    .map { text in Int(text) ?? 0 }
    .then { id in fetchUser(id) }
    .then { user in fetchFriends(of: user) }
    .map { friends in friends.map(\.name).joined(separator: ", ") }
    .done { names in print("friends: \(names)") }
    .catch { error in showError(error) }
}
