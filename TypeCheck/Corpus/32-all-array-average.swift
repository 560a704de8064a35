// Array Promise.all of fetchUser over a literal, reduce with $0 + $1 / Double, then a ternary.
import Promises

func chain_32() {
  Promise.all([1, 2, 3].map { fetchUser($0) })
    .map { users in users.reduce(0) { $0 + $1.score } / Double(users.count) }
    .map { average in average > 0.5 ? "good" : "needs work" }
    .done { verdict in log("team: \(verdict)") }
    .catch { error in showError(error) }
}
