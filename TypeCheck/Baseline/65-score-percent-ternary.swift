// The Swift baseline of Corpus/65: the same closures over Optional.map/flatMap.
func baseline_65() {
  _ = fetchUserNow(4)
    .map { user in user.score > 1 ? 100 : Int(user.score * 100) }
    .map { percent in percent >= 50 ? "\(percent)% (pass)" : "\(percent)% (fail)" }
    .map { text in log(text) }
}
