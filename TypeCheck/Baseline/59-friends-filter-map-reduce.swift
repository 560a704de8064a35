// The Swift baseline of Corpus/59: the same closures over Optional.map/flatMap.
func baseline_59() {
  _ = fetchUserNow(1)
    .flatMap { user in fetchFriendsNow(of: user) }
    .map { friends in friends.filter { $0.score > 0.2 }.map { $0.score * 100 }.reduce(0, +) }
    .map { total in total > 50 ? "active" : "quiet" }
    .map { verdict in log("friends: \(verdict)") }
}
