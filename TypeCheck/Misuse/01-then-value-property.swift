// expect-error: use 'map'
// A closure that returns a value, handed to then.
import PromiseHTTP
import Promises

func misuse_01() {
  fetchUser(1).then { user in user.name }.catch { error in showError(error) }
}
