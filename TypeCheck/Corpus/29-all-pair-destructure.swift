// Promise.all(a, b) with the tuple destructured in the closure's parameters, value step with interpolation.
import Promises

func chain_29() {
  let user = fetchUser(1)
  Promise.all(user, user.then { user in fetchAvatar(user) })
    .map { user, avatar in "\(user.name): \(avatar.url)" }
    .done { line in log(line) }
    .catch { error in showError(error) }
}
