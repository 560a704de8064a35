// expect-error: 'done' for one that returns nothing
// A closure that returns nothing, handed to then.
import PromiseHTTP
import Promises

func misuse_02() {
  fetchUser(1).then { user in print(user.name) }.catch { error in showError(error) }
}
