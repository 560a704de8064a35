// Issue 31: Failing/04 fixed: the arithmetic step declares its result type.
import Promises

func chain_67() {
  fetchUser(5)
    .then { user in fetchFriends(of: user) }
    .map { friends in friends.map { $0.name }.sorted().prefix(5) }
    .map { names -> Int in names.count * 100 / 5 }
    .map { percent in percent == 100 ? "full" : "\(percent)%" }
    .done { text in log(text) }
    .catch { error in showError(error) }
}
