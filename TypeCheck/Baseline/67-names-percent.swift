// The Swift baseline of Corpus/67: the same closures over Optional.map/flatMap.
func baseline_67() {
  _ = fetchUserNow(5)
    .flatMap { user in fetchFriendsNow(of: user) }
    .map { friends in friends.map { $0.name }.sorted().prefix(5) }
    .map { names -> Int in names.count * 100 / 5 }
    .map { percent in percent == 100 ? "full" : "\(percent)%" }
    .map { text in log(text) }
}
