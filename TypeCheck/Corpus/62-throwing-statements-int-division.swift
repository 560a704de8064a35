// Issue 31: a throwing multi-statement map, then Int(free / 45) on its result.
import Promises

func chain_62() {
  fetchSettings()
    .map { settings in
      guard !settings.muted else { throw AppError.expired }
      let free = 1_000 - settings.volume * 100
      return free
    }
    .map { free in Int(free / 45) }
    .done { slots in log("\(slots) slots") }
    .catch { error in showError(error) }
}
