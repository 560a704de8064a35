// recover of several statements that rethrows what it cannot handle and returns a fallback value.
import Promises

func chain_36() {
  fetchUser(404)
    .recover { error in
      guard error is AppError else { throw error }
      return User.guest
    }
    .map { user in user.name }
    .catch { error in showError(error) }
}
