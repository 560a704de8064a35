// then(on: .main): a one-expression value step, then a Void step on main with an optional-chained label.
import Dispatch
import Promises

func chain_50() {
  fetchUser(1)
    .map(on: .main) { user in user.friendIDs.count }
    .done(on: .main) { count in print(count == 1 ? "1 friend" : "\(count) friends") }
    .catch(on: .main) { error in showError(error) }
}
