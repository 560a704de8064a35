// The Swift baseline of Corpus/62: the same closures over Optional.map/flatMap.
func baseline_62() throws {
  _ = try fetchSettingsNow()
    .map { settings in
      guard !settings.muted else { throw AppError.expired }
      let free = 1_000 - settings.volume * 100
      return free
    }
    .map { free in Int(free / 45) }
    .map { slots in log("\(slots) slots") }
}
