// Value step, one expression: optional chaining through split/last/map with a ?? fallback.
import Promises

func chain_10() {
  fetchUser(1)
    .map { user in user.avatarURL?.split(separator: "/").last.map(String.init) ?? "default.png" }
    .then { file in downloadThumbnail(file) }
    .catch { error in showError(error) }
}
