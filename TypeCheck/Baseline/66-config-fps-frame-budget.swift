// The Swift baseline of Corpus/66: the same closures over Optional.map/flatMap.
func baseline_66() {
  _ = loadConfigNow(from: "backup")
    .map { config in Double(config["fps"] ?? 30) }
    .map { fps in 1_000 / fps }
    .map { (frameMs: Double) in Int(frameMs / 16.7 * 100) }
    .map { percent in log("frame budget \(percent)%") }
}
