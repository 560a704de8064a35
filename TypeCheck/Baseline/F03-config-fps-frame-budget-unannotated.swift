// expect-slow: Swift alone needs the annotation too
// The Swift baseline of Failing/03: the same closures over Optional.map/flatMap.
func baseline_F03() {
  _ = loadConfigNow(from: "backup")
    .map { config in Double(config["fps"] ?? 30) }
    .map { fps in 1_000 / fps }
    .map { frameMs in Int(frameMs / 16.7 * 100) }
    .map { percent in log("frame budget \(percent)%") }
}
