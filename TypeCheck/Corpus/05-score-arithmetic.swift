// Value steps, one expression each: floating-point arithmetic, rounding, a ternary on the result.
import Promises

func chain_05() {
  fetchUser(7)
    .map { user in user.score * 100 / 3 + 0.5 }
    .map { score in Int(score.rounded()) }
    .map { points in points > 50 ? "gold" : "silver" }
    .done { badge in log("badge: \(badge)") }
    .catch { error in showError(error) }
}
