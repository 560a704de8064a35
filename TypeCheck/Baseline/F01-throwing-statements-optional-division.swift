// expect-error: cannot convert value of type 'Double?'
// The Swift baseline of Failing/01: the same closures over Optional.map/flatMap.
func baseline_F01() throws {
  _ = try fetchSettingsNow()
    .map { settings in
      guard !settings.muted else { throw AppError.expired }
      let free = Double(settings.theme)
      return free
    }
    .map { free in Int(free / 45) }
    .map { slots in log("\(slots) slots") }
}
