// Promise { try await ... } from async code, then a ternary with interpolation ("99+").
import Promises

func chain_51() {
  Promise { try await fetchUnreadCount() }
    .then { count in count > 99 ? "99+" : "\(count)" }
    .then { badge in log("badge \(badge)") }
    .catch { error in showError(error) }
}
