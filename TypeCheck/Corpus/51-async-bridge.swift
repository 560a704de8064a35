// Promise { try await ... } from async code, then a ternary with interpolation ("99+").
import Promises

func chain_51() {
  Promise { try await fetchUnreadCount() }
    .map { count in count > 99 ? "99+" : "\(count)" }
    .done { badge in log("badge \(badge)") }
    .catch { error in showError(error) }
}
