// expect-error: cannot convert value of type 'Double?'
// Issue 31: a throwing multi-statement map whose result is optional (Double(String) is), then
// Int(free / 45) on it: a genuine error, diagnosed through the library.
import Promises

func failing_01() {
  fetchSettings()
    .map { settings in
      guard !settings.muted else { throw AppError.expired }
      let free = Double(settings.theme)
      return free
    }
    .map { free in Int(free / 45) }
    .done { slots in log("\(slots) slots") }
    .catch { error in showError(error) }
}
