// Promise.all(a, b) followed by a promise step whose ternary returns Promise(...) or a nested chain.
import Promises

func chain_33() {
  Promise.all(fetchUser(1), fetchSettings())
    .then { pair in pair.1.muted ? Promise(pair.0.name) : fetchAvatar(pair.0).map { avatar in avatar.url } }
    .done { label in log(label) }
    .catch { error in showError(error) }
}
