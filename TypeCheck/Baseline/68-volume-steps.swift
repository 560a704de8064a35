// The Swift baseline of Corpus/68: the same closures over Optional.map/flatMap.
func baseline_68() {
  _ = fetchSettingsNow()
    .map { settings in settings.volume * 0.9 + 0.05 }
    .map { volume in volume > 1 ? 1 : volume }
    .map { volume in Int(volume * 100) }
    .map { percent in log("volume \(percent)%") }
}
