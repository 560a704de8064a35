// Value step producing an interpolated string with several arithmetic pieces, then a Void step.
import Promises

func chain_07() {
  fetchUser(7)
    .map { user in "\(user.name) (\(user.friendIDs.count) friends, score \(Int(user.score * 100))%)" }
    .done { line in print(line) }
    .catch { error in print("failed: \(error)") }
}
