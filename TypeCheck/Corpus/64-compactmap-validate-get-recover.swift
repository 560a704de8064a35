// Issue 31: compactMap, validate, get and recover in one chain.
import Promises

func chain_64() {
  fetchUser(3)
    .compactMap { user in user.friendIDs.first }
    .validate { id in id > 0 && id < 1_000 }
    .get { id in log("friend \(id)") }
    .recover { _ in 0 }
    .map { id in id * 2 + 1 }
    .done { key in log("key \(key)") }
    .catch { error in showError(error) }
}
