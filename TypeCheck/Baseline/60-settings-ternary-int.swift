// The Swift baseline of Corpus/60: the same closures over Optional.map/flatMap.
func baseline_60() {
  _ = fetchSettingsNow()
    .map { settings in settings.muted ? 0 : Int(settings.volume * 10) }
    .map { level in level == 0 ? "muted" : "level \(level)" }
    .map { text in log(text) }
}
