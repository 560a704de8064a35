import Dispatch
import Testing

@testable import Promises

/// `UnhandledRejection.handler`, `debugDescription` and the creation sites in errors.
///
/// The handler is a global, so this suite is serialized and each test restores the previous
/// handler (and forwards to it). Other suites run in parallel and may release unobserved
/// rejections of their own, so every assertion filters reports by the creation site of the
/// promise under test.
@Suite("Diagnostics", .serialized, .timeLimit(.minutes(1)))
struct DiagnosticsTests {
  /// Reports received while `body` runs.
  private final class Recorder: Sendable {
    let reports = Guarded<[UnhandledRejection]>([])
    /// Fulfilled by the first report for `watchedSite`.
    let firstReport: Promise<UnhandledRejection>
    private let firstReportResolver: Promise<UnhandledRejection>.Resolver
    let watchedSite = Guarded<CreationSite?>(nil)

    init() {
      (firstReport, firstReportResolver) = Promise<UnhandledRejection>.pending()
      // Observed from the start: if no report comes, the broken promise is not reported.
      firstReport.catch { _ in }
    }

    func record(_ report: UnhandledRejection) {
      reports.withLock { $0.append(report) }
      if report.site == watchedSite.value { firstReportResolver.fulfill(report) }
    }

    func reports(at site: CreationSite) -> [UnhandledRejection] {
      reports.value.filter { $0.site == site }
    }
  }

  private func withRecorder(_ body: (Recorder) async throws -> Void) async rethrows {
    let previous = UnhandledRejection.handler
    let recorder = Recorder()
    UnhandledRejection.handler = { report in
      recorder.record(report)
      previous?(report)
    }
    defer { UnhandledRejection.handler = previous }
    try await body(recorder)
  }

  private func site(_ line: Int) -> CreationSite {
    CreationSite(fileID: #fileID, line: line)
  }

  // MARK: Reported

  @Test func anUnobservedRejectedPromiseIsReportedOnceWhenReleased() async {
    await withRecorder { recorder in
      let error = IdentifiedError()
      let line = #line + 1
      @inline(never) func drop() { _ = Promise<Int>(error: error) }
      drop()
      let reports = recorder.reports(at: site(line))
      #expect(reports.count == 1)
      #expect(isSame(reports.first?.error, as: error))
      #expect(reports.first?.description.contains("DiagnosticsTests.swift:\(line)") == true)
    }
  }

  @Test func aRejectionSettledOnAQueueIsReportedOnceWhenItsPromiseIsReleased() async throws {
    try await withRecorder { recorder in
      let queue = DispatchQueue(label: "tests.diagnostics.async")
      let error = IdentifiedError()
      let line = #line + 1
      @inline(never) func drop() { _ = Promise(1).map(on: queue) { _ -> Int in throw error } }
      recorder.watchedSite.value = site(line)
      drop()
      let report = try await recorder.firstReport.value
      #expect(isSame(report.error, as: error))
      await drainQueue(queue)
      #expect(recorder.reports(at: site(line)).count == 1)
    }
  }

  @Test func anUnobservedBrokenPromiseIsReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      @inline(never) func drop() { _ = Promise<Int> { _ in } }
      drop()
      let reports = recorder.reports(at: site(line))
      #expect(reports.count == 1)
      #expect(reports.first?.error as? PromiseError == .brokenPromise(createdAt: site(line)))
    }
  }

  // MARK: Not reported

  /// Observes a rejected promise made at `line` with `observe`, releases it, and checks that it
  /// was freed without a report.
  private func expectNoReport(
    _ recorder: Recorder, line: Int, queue: DispatchQueue = .promises,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ make: () -> Promise<Int>,
    observe: (Promise<Int>) async -> Void
  ) async {
    @inline(never) func scope() async -> WeakObserver<Promise<Int>> {
      let promise = make()
      await observe(promise)
      return WeakObserver(promise)
    }
    let freed = await scope()
    await drainQueue(queue)
    #expect(freed.isNil, "the promise under test was not freed", sourceLocation: sourceLocation)
    #expect(recorder.reports(at: site(line)).isEmpty, sourceLocation: sourceLocation)
  }

  @Test func aRejectionObservedByCatchIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>(error: CoreTestError.first) }) { promise in
        _ = await settledOutcome(of: promise.catch { _ in })
      }
    }
  }

  @Test func aRejectionObservedByThenIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>(error: CoreTestError.first) }) { promise in
        _ = await settledOutcome(of: promise.map { $0 })
      }
    }
  }

  @Test func aRejectionObservedByRecoverIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>(error: CoreTestError.first) }) { promise in
        _ = await settledOutcome(of: promise.recover { _ in 0 })
      }
    }
  }

  @Test func aRejectionObservedByWhenSettledIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>(error: CoreTestError.first) }) { promise in
        _ = await settledOutcome(of: promise.whenSettled { _ in }.recover { _ in 0 })
      }
    }
  }

  @Test func aRejectionObservedByValueIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>(error: CoreTestError.first) }) { promise in
        _ = try? await promise.value
      }
    }
  }

  @Test func aRejectionObservedByWaitIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>(error: CoreTestError.first) }) { promise in
        _ = try? promise.wait(timeout: 1)
      }
    }
  }

  @Test func aRejectionObservedByResultIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>(error: CoreTestError.first) }) { promise in
        _ = promise.result
      }
    }
  }

  @Test func aRejectionObservedByAllIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>(error: CoreTestError.first) }) { promise in
        _ = await settledOutcome(of: Promise.all([promise]))
      }
    }
  }

  @Test func aBrokenPromiseObservedByCatchIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      await expectNoReport(recorder, line: line, { Promise<Int>.pending().promise }) { promise in
        // `pending().promise` drops the resolver at once: a broken promise, then observed.
        _ = await settledOutcome(of: promise.catch { _ in })
      }
    }
  }

  @Test func aCancelledPromiseIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 1
      @inline(never) func drop() -> WeakObserver<Promise<Int>> {
        let (promise, resolver) = Promise<Int>.pending()
        promise.cancel()
        _ = resolver
        return WeakObserver(promise)
      }
      let freed = drop()
      #expect(freed.isNil)
      #expect(recorder.reports(at: site(line)).isEmpty)
    }
  }

  @Test func aCancelledChainIsNotReported() async {
    await withRecorder { recorder in
      let line = #line + 4  // the head; its two links are on the next line
      @inline(never) func drop() -> WeakObserver<Promise<Int>> {
        // The resolver outlives the cancellation: released first, it would break the head
        // and race the cancellation down the chain with a `brokenPromise` rejection.
        let (head, resolver) = Promise<Int>.pending()
        let tail = head.map { $0 }.map { $0 }
        withExtendedLifetime(resolver) { tail.cancel() }
        return WeakObserver(tail)
      }
      let freed = drop()
      await drainQueue(.promises)
      #expect(freed.isNil)
      #expect(recorder.reports(at: site(line)).isEmpty)
      #expect(recorder.reports(at: site(line + 1)).isEmpty)
    }
  }

  // MARK: Descriptions

  @Test func debugDescriptionShowsAFulfilledValueAndTheCreationSite() {
    let line = #line + 1
    let promise = Promise(42)
    #expect(
      promise.debugDescription
        == "Promise<Int>(fulfilled: 42, created at PromisesTests/DiagnosticsTests.swift:\(line))")
  }

  @Test func debugDescriptionShowsPendingCallbacks() {
    let line = #line + 1
    let (promise, resolver) = Promise<String>.pending()
    let first = promise.map { $0 }
    let second = promise.map { $0 }
    #expect(
      promise.debugDescription
        == "Promise<String>(pending, 2 callbacks waiting, created at PromisesTests/DiagnosticsTests.swift:\(line))"
    )
    resolver.fulfill("done")
    _ = (first, second)
  }

  @Test func debugDescriptionShowsARejection() {
    let line = #line + 1
    let promise = Promise<Int>(error: CoreTestError.second)
    let text = promise.debugDescription
    #expect(text.hasPrefix("Promise<Int>(rejected: "))
    #expect(text.contains("second"))
    #expect(text.hasSuffix("created at PromisesTests/DiagnosticsTests.swift:\(line))"))
    _ = promise.result
  }

  @Test func everyCombinatorRecordsItsCallSite() {
    let source = Promise(1)
    let line = #line
    let then = source.map { $0 }
    let recover = source.recover { _ in 0 }
    let all = Promise.all([source])
    #expect(then.creationSite == site(line + 1))
    #expect(recover.creationSite == site(line + 2))
    #expect(all.creationSite == site(line + 3))
    #expect(source.creationSite == site(line - 1))
  }

  @Test func promiseErrorsNameTheCreationSite() {
    let here = site(7)
    let errors: [PromiseError] = [
      .brokenPromise(createdAt: here),
      .timedOut(after: .seconds(1), createdAt: here),
      .validationFailed(createdAt: here),
      .chainingCycle(createdAt: here),
      .waitWouldDeadlock(queue: "q", createdAt: here),
    ]
    for error in errors {
      #expect(error.description.contains("PromisesTests/DiagnosticsTests.swift:7"), "\(error)")
    }
    #expect(PromiseError.allRejected([CoreTestError.first]).description.contains("first"))
  }

  // MARK: The default handler

  @Test(.tags(.childProcess))
  func byDefaultDebugBuildsLogAnUnhandledRejectionToStandardErrorAndReleaseBuildsDoNot() async throws {
    let result = try await #require(
      processExitsWith: .success, observing: [\.standardOutputContent, \.standardErrorContent]
    ) {
      // The creation and `#line` on one line: the exit test's expansion may renumber lines.
      @inline(never) func drop() -> Int { _ = Promise<Int>(error: CoreTestError.first); return #line }
      print("line \(drop())")
    }
    let output = String(decoding: result.standardOutputContent, as: UTF8.self)
    let errors = String(decoding: result.standardErrorContent, as: UTF8.self)
    let line = try #require(output.split(separator: " ").last.flatMap { Int($0.filter(\.isNumber)) })
    #if DEBUG
      #expect(
        errors.contains(
          "Promises: unhandled rejection of the promise created at PromisesTests/DiagnosticsTests.swift:\(line): first"
        ))
    #else
      #expect(!errors.contains("unhandled rejection"))
    #endif
  }

  @Test func theDefaultHandlerIsTheStandardErrorLogInDebugBuildsOnly() {
    #if DEBUG
      #expect(UnhandledRejection.defaultHandler != nil)
    #else
      #expect(UnhandledRejection.defaultHandler == nil)
    #endif
  }

  @Test(.tags(.childProcess)) func settingTheHandlerToNilSilencesTheLog() async throws {
    let result = try await #require(processExitsWith: .success, observing: [\.standardErrorContent]) {
      UnhandledRejection.handler = nil
      @inline(never) func drop() { _ = Promise<Int>(error: CoreTestError.first) }
      drop()
    }
    #expect(!String(decoding: result.standardErrorContent, as: UTF8.self).contains("unhandled rejection"))
  }
}
