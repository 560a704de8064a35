// Value steps, one expression each: floating-point arithmetic, rounding, a ternary on the result.
import Promises

func chain_05() {
  fetchUser(7)
    .then { user in user.score * 100 / 3 + 0.5 }
    .then { score in Int(score.rounded()) }
    .then { points in points > 50 ? "gold" : "silver" }
    .then { badge in log("badge: \(badge)") }
    .catch { error in showError(error) }
}
