// Promise step (fetchFriends), value step with filter/sorted/prefix/map/joined and $0 comparisons.
import Promises

func chain_57() {
  fetchUser(1)
    .then { user in fetchFriends(of: user) }
    .map { friends in friends.filter { $0.score > 0.5 }.sorted { $0.score > $1.score }.prefix(3).map(\.name) }
    .map { names in names.isEmpty ? "nobody" : names.joined(separator: " & ") }
    .done { line in print("top: \(line)") }
    .catch { error in showError(error) }
}
