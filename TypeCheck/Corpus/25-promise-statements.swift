// Promise step of several statements (let, log, return a promise), then a value step.
import Promises

func chain_25() {
  fetchUser(1)
    .then { user in
      let next = user.friendIDs.first ?? user.id
      log("following \(next)")
      return fetchUser(next)
    }
    .map { friend in friend.name }
    .catch { error in showError(error) }
}
