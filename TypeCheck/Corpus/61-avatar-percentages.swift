// Issue 31: percentages: a Double ratio times 100, rounded into an Int, then a String.
import Promises

func chain_61() {
  fetchUser(2)
    .then { user in fetchAvatar(user) }
    .map { avatar in Double(avatar.bytes) / 4_096 * 100 }
    .map { percent in Int(percent.rounded()) }
    .map { percent in "\(percent)% of the quota" }
    .done { text in log(text) }
    .catch { error in showError(error) }
}
