// Throwing promise step of several statements (guard/throw, return a promise).
import Promises

func chain_26() {
  Promise("17")
    .then { text in
      guard let id = Int(text), id > 0 else { throw AppError.badInput(text) }
      return fetchUser(id)
    }
    .done { user in log(user.name) }
    .catch { error in showError(error) }
}
