// expect-error: use 'map'
// Two value links written with then, as code of the old API was (Promise+ThenTests).
import PromiseHTTP
import Promises

func misuse_06() {
  _ = Promise(20).then { $0 + 1 }.then { "\($0 * 2)" }
}
