// expect-slow: Swift alone needs the annotation too
// The Swift baseline of Failing/04: the same closures over Optional.map/flatMap.
func baseline_F04() {
  _ = fetchUserNow(5)
    .flatMap { user in fetchFriendsNow(of: user) }
    .map { friends in friends.map { $0.name }.sorted().prefix(5) }
    .map { names in names.count * 100 / 5 }
    .map { percent in percent == 100 ? "full" : "\(percent)%" }
    .map { text in log(text) }
}
