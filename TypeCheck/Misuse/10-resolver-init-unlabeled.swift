// expect-error: renamed to 'init(file:line:resolving:)'
// The resolver initializer called with an unlabeled closure argument.
import PromiseHTTP
import Promises

func misuse_10() {
  let start: (Promise<Int>.Resolver) -> Void = { resolver in resolver.fulfill(1) }
  _ = Promise<Int>(start)
}
