// Value step, one expression: optional chaining, ?? and string interpolation.
import Promises

func chain_06() {
  fetchUser(7)
    .map { user in user.email?.lowercased() ?? "\(user.name.lowercased())@example.com" }
    .done { address in log("mail to \(address)") }
    .catch { error in showError(error) }
}
