// expect-error: cannot convert value of type 'String'
// The Swift baseline of Failing/02: the same closures over Optional.map/flatMap.
func baseline_F02() throws {
  _ = try fetchSettingsNow()
    .map { settings in
      guard !settings.muted else { throw AppError.expired }
      let free = settings.theme
      return free
    }
    .map { free in Int(free / 45) }
    .map { slots in log("\(slots) slots") }
}
