// expect-error: use 'map'
// A closure of several statements that returns a value, handed to then.
import PromiseHTTP
import Promises

func misuse_03() {
  fetchUser(1)
    .then { user in
      let first = user.name.split(separator: " ").first ?? ""
      return first.uppercased()
    }
    .catch { error in showError(error) }
}
