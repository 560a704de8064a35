// Spinner pattern: promise step, value arithmetic step, always, catch.
import Promises

func chain_37() {
  spinner.show()
  fetchUser(1)
    .then { user in fetchAvatar(user) }
    .map { avatar in avatar.bytes / 1_024 }
    .done { kilobytes in log("avatar is \(kilobytes) KiB") }
    .always { spinner.hide() }
    .catch { error in showError(error) }
}
