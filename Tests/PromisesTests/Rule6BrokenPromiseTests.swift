import Dispatch
import Testing

@testable import Promises

/// Rule 6: when nothing can settle a pending promise any more, everything chained on it is
/// rejected with `PromiseError.brokenPromise` instead of hanging forever.
@Suite("Rule 6: a promise nobody can settle is broken, not hung", .timeLimit(.minutes(1)))
struct Rule6BrokenPromiseTests {
  private func brokenSite(_ error: (any Error)?) -> CreationSite? {
    guard case .brokenPromise(let site)? = error as? PromiseError else { return nil }
    return site
  }

  /// Makes a pending promise whose only resolver lives in the returned box.
  ///
  /// No local variable of the caller holds the resolver (a debug build keeps locals alive to
  /// the end of their scope), so setting the box to `nil` releases the last copy.
  private func pendingWithResolverInABox(
    file: StaticString = #fileID, line: UInt = #line
  ) -> (Promise<Int>, Guarded<Promise<Int>.Resolver?>) {
    let (promise, resolver) = Promise<Int>.pending(file: file, line: line)
    return (promise, Guarded(resolver))
  }

  @Test func releasingTheResolverRejectsEveryLinkOfAWaitingChainWithBrokenPromise() async {
    let line = #line + 1
    let (head, box) = pendingWithResolverInABox()
    let site = CreationSite(fileID: #fileID, line: line)
    let first = head.map { $0 + 1 }
    let second = first.then { value in Promise(value * 2) }
    let third = second.always {}
    #expect(box.value?.isPending == true)
    box.value = nil
    for link in [head, first, second, third] {
      let error = await rejectionError(of: link)
      #expect(
        brokenSite(error) == site, "every link is rejected with brokenPromise(createdAt: the pending() call)")
    }
  }

  @Test func aBrokenPromiseNamesThisFileAndLineAsItsCreationSite() async {
    let line = #line + 1
    let (promise, box) = pendingWithResolverInABox()
    let chain = promise.map { $0 }
    box.value = nil
    let error = await rejectionError(of: chain)
    let site = brokenSite(error)
    #expect(site?.fileID == #fileID)
    #expect(site?.fileID.hasSuffix("Rule6BrokenPromiseTests.swift") == true)
    #expect(site?.line == line)
    #expect(error.map { "\($0)" }?.contains("Rule6BrokenPromiseTests.swift:\(line)") == true)
  }

  @Test func aBodyThatDropsTheResolverBreaksThePromise() async {
    let line = #line + 1
    let promise = Promise<Int> { _ in }
    let error = await rejectionError(of: promise)
    #expect(brokenSite(error) == CreationSite(fileID: #fileID, line: line))
  }

  @Test func aChainOnABodyThatDropsTheResolverIsRejectedToo() async {
    let chain = Promise<Int> { _ in }.map { $0 + 1 }.map { $0 * 2 }
    #expect(brokenSite(await rejectionError(of: chain)) != nil)
  }

  @Test func aResolverReleasedOnAnotherThreadBreaksThePromise() async {
    let (promise, box) = pendingWithResolverInABox()
    let chain = promise.map { $0 }
    DispatchQueue.global().async { box.value = nil }
    #expect(brokenSite(await rejectionError(of: chain)) != nil)
  }

  @Test func aResolverKeptByPendingWorkKeepsThePromiseAlive() async throws {
    let (gate, gateResolver) = Promise<Void>.pending()
    let promise = Promise<Int> { resolver in
      // The work keeps the resolver until the gate opens, then fulfils.
      _ = gate.map { resolver.fulfill(8) }
    }
    let chain = promise.map { $0 + 1 }
    #expect(promise.isPending)
    gateResolver.fulfill()
    #expect(try await chain.value == 9)
  }

  @Test func anAdoptedPromiseThatBreaksRejectsTheAdopter() async {
    let (inner, box) = pendingWithResolverInABox()
    let innerSite = inner.creationSite
    let outer = Promise(1).then { _ in inner }
    let done = outer.map { $0 }
    // Release the inner resolver once the outer promise has adopted `inner`.
    await yieldUntil { callbacksWaiting(on: inner) == 1 }
    box.value = nil
    #expect(brokenSite(await rejectionError(of: done)) == innerSite)
  }

  @Test func aSettledPromiseDoesNotBreakWhenItsResolverIsReleased() async throws {
    let holder = Guarded<Promise<Int>.Resolver?>(nil)
    let (promise, resolver) = Promise<Int>.pending()
    holder.value = resolver
    resolver.fulfill(3)
    holder.value = nil
    #expect(try await promise.value == 3)
  }

  @Test func aBrokenPromiseCanBeRecovered() async throws {
    let chain = Promise<Int> { _ in }.recover { error -> Int in
      guard case .brokenPromise = error as? PromiseError else { throw error }
      return -1
    }
    #expect(try await chain.value == -1)
  }

  @Test func aBrokenPromiseIsNotReportedAsCancelled() async {
    let (promise, box) = pendingWithResolverInABox()
    box.value = nil
    let error = await rejectionError(of: promise)
    #expect(!(error is CancellationError))
    #expect(!promise.isPending)
  }
}
