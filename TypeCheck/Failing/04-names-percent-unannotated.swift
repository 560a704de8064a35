// expect-slow: a one-line chain that needs one annotation (Corpus/67 is the fix)
// Issue 31: map/sorted/prefix inside a step, then count arithmetic and a ternary.
import Promises

func failing_04() {
  fetchUser(5)
    .then { user in fetchFriends(of: user) }
    .map { friends in friends.map { $0.name }.sorted().prefix(5) }
    .map { names in names.count * 100 / 5 }
    .map { percent in percent == 100 ? "full" : "\(percent)%" }
    .done { text in log(text) }
    .catch { error in showError(error) }
}
