// Throwing promise step in one expression: fetchUser(try parseID(text)).
import Promises

func chain_27() {
  Promise("17")
    .then { text in fetchUser(try parseID(text)) }
    .then { user in fetchAvatar(user) }
    .done { avatar in print("avatar \(avatar.url), \(avatar.bytes / 1_024) KiB") }
    .catch { error in showError(error) }
}
