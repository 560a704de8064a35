// expect-error: 'done' for one that returns nothing
// Issue 22's Promise.all example as it was written, with then.
import PromiseHTTP
import Promises

func misuse_07() {
  Promise.all(fetchUser(1), fetchSettings()).then { pair in print(pair.0) }.catch { error in showError(error) }
}
