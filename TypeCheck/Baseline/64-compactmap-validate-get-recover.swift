// The Swift baseline of Corpus/64: the same closures over Optional.map/flatMap (`validate`,
// `get`, `recover`: one overload each, Support.swift).
func baseline_64() {
  _ = fetchUserNow(3)
    .flatMap { user in user.friendIDs.first }
    .validate { id in id > 0 && id < 1_000 }
    .get { id in log("friend \(id)") }
    .recover { _ in 0 }
    .map { id in id * 2 + 1 }
    .map { key in log("key \(key)") }
}
