// map, compactMap (first), then a promise step, get (side effect), map with ??.
import Promises

func chain_39() {
  fetchUser(1)
    .map { user in user.friendIDs }
    .compactMap { ids in ids.first }
    .then { id in fetchUser(id) }
    .get { friend in log("friend \(friend.name)") }
    .map { friend in friend.email ?? "no email" }
    .catch { error in showError(error) }
}
