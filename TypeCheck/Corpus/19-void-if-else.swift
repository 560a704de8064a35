// Void step whose body is an if/else, then always (spinner) and catch.
import Promises

func chain_19() {
  spinner.show()
  fetchUser(2)
    .done { user in
      if user.friendIDs.isEmpty {
        log("\(user.name) has no friends yet")
      } else {
        log("\(user.name) has \(user.friendIDs.count) friends")
      }
    }
    .always { spinner.hide() }
    .catch { error in showError(error) }
}
