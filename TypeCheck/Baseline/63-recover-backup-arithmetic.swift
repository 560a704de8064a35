// The Swift baseline of Corpus/63: the same closures over Optional.map/flatMap (`recoverWith`:
// a recover taking an optional, Support.swift).
func baseline_63() {
  _ = loadConfigNow(from: "primary")
    .recoverWith { _ in loadConfigNow(from: "backup") }
    .map { config in (config["bitrate"] ?? 1_000) * 1_000 / 8 }
    .map { bytesPerSecond in bytesPerSecond / 1_024 }
    .map { kib in log("\(kib) KiB/s") }
}
