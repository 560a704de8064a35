import Testing

@testable import Promises

/// A node kind that forgets to override what every kind must provide traps at once, instead of
/// leaving the chain behind it pending for ever.
@Suite("Node kinds must override their callbacks", .timeLimit(.minutes(1)))
struct AbstractNodeTests {
  @Test(.tags(.childProcess)) func aCallbackNodeThatDoesNotOverrideFireTraps() async {
    await #expect(processExitsWith: .failure) {
      let (promise, resolver) = Promise<Int>.pending()
      let done = Promise<Int>.pending()
      promise.register(ForgetfulNode())
      promise.register(ForwardingNode<Int>(owner: done.promise) { done.resolver.resolve($0) })
      resolver.fulfill(1)
      _ = try? done.promise.wait(timeout: 10)
    }
  }

  @Test(.tags(.childProcess)) func aLinkThatDoesNotOverrideRunTraps() async {
    await #expect(processExitsWith: .failure) {
      let (source, resolver) = Promise<Int>.pending()
      let link = ForgetfulLink(source: source, queue: .promises, file: #fileID, line: #line)
      source.registerLink(link)
      resolver.fulfill(1)
      _ = try? link.wait(timeout: 10)
    }
  }

  @Test(.tags(.childProcess)) func aLinkThatDoesNotOverrideTakeBodyTrapsWhenCancelled() async {
    await #expect(processExitsWith: .failure) {
      let (source, _) = Promise<Int>.pending()
      let link = ForgetfulLink(source: source, queue: .promises, file: #fileID, line: #line)
      source.registerLink(link)
      link.cancel()
      // The cancelled link is fired on its queue, where it takes its body and traps: the child
      // waits for that (at most 10 s) instead of exiting 0 before the queue gets to it, which
      // it did in 1 of ~10 whole-suite runs.
      let (never, resolver) = Promise<Int>.pending()
      _ = try? never.wait(timeout: 10)
      withExtendedLifetime(resolver) {}
    }
  }
}

/// A node kind without `fire`.
final class ForgetfulNode: _PromiseNode, @unchecked Sendable {
  init() { super.init(queue: nil) }
}

/// A link kind without `run` and `takeBody`.
final class ForgetfulLink: DerivedPromise<Int, Int>, @unchecked Sendable {}
