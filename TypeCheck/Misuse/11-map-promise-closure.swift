// expect-error: use 'then' to adopt its outcome
// A closure that returns a promise, handed to map, with a step after it that needs the inner value.
import PromiseHTTP
import Promises

func misuse_11() {
  fetchUser(1).map { user in fetchAvatar(user) }.map { avatar in avatar.url }.catch { error in showError(error) }
}
