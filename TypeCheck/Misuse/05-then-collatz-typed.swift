// expect-error: use 'map'
// The same ternary handed to then, on a promise whose type is known.
import PromiseHTTP
import Promises

func misuse_05() {
  _ = fetchUser(8).then { user in user.id % 2 == 0 ? user.id / 2 : user.id * 3 + 1 }
}
