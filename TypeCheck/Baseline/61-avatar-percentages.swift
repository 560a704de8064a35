// The Swift baseline of Corpus/61: the same closures over Optional.map/flatMap.
func baseline_61() {
  _ = fetchUserNow(2)
    .flatMap { user in fetchAvatarNow(user) }
    .map { avatar in Double(avatar.bytes) / 4_096 * 100 }
    .map { percent in Int(percent.rounded()) }
    .map { percent in "\(percent)% of the quota" }
    .map { text in log(text) }
}
