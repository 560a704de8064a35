// Throwing Void step of several statements (guard/throw, try, log), then catch.
import Promises

func chain_21() {
  fetchUser(9)
    .done { user in
      guard user.email != nil else { throw AppError.notFound }
      try save(user)
      log("saved \(user.id)")
    }
    .catch { error in showError(error) }
}
