// Value step of several statements (lets, then return), followed by a Void step.
import Promises

func chain_12() {
  fetchUser(3)
    .map { user in
      let first = user.name.split(separator: " ").first ?? ""
      let initial = first.prefix(1).uppercased()
      return "\(initial). \(user.name)"
    }
    .done { label in log(label) }
    .catch { error in showError(error) }
}
