// expect-error: cannot convert value of type 'String'
// Issue 31: a throwing multi-statement map that returns a String, then Int(free / 45) on it.
import Promises

func failing_02() {
  fetchSettings()
    .map { settings in
      guard !settings.muted else { throw AppError.expired }
      let free = settings.theme
      return free
    }
    .map { free in Int(free / 45) }
    .done { slots in log("\(slots) slots") }
    .catch { error in showError(error) }
}
