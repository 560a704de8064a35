import Foundation
import Testing

@testable import PromiseHTTP

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Tasks are named by strings: the machine only hands them back in its actions.
typealias ExchangeMachine = ExchangeStateMachine<String>

@Suite("ExchangeStateMachine")
struct ExchangeStateMachineTests {
  static let url = URL(string: "http://127.0.0.1:8080/upload")!
  static let limit = 10

  static func machine(
    _ request: URLRequest = URLRequest(url: url), policy: RedirectPolicy = .follow(maximum: 5)
  ) -> ExchangeMachine {
    ExchangeMachine(
      task: "first",
      settings: ExchangeMachine.Settings(
        request: request, requestURL: request.url!, maximumBodySize: limit, redirectPolicy: policy,
        sensitiveHeaders: .defaultSensitive, sensitiveParameters: .defaultSensitive),
      completion: { _ in })
  }

  static func post(body: String = "payload", cookie: String? = nil) -> URLRequest {
    var request = URLRequest(url: url)
    request.httpMethod = "POST"
    request.httpBody = Data(body.utf8)
    if let cookie { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
    return request
  }

  static func response(
    _ status: Int, url: URL = url, headers: [String: String] = [:]
  ) -> HTTPURLResponse {
    HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
  }

  static func redirection(_ status: Int, to location: String) -> HTTPURLResponse {
    response(status, headers: ["Location": location])
  }

  /// The request FoundationNetworking proposes for a hop to `location` (without the body).
  static func proposed(_ location: String, from request: URLRequest, cookie: String? = nil) -> URLRequest {
    var proposed = request
    proposed.url = URL(string: location, relativeTo: url)!.absoluteURL
    proposed.httpBody = nil
    if let cookie { proposed.setValue(cookie, forHTTPHeaderField: "Cookie") }
    return proposed
  }

  /// The result of a `finish` action, and the task it cancels; `nil` for any other action.
  static func finished(_ action: ExchangeMachine.Action) -> (Result<HTTPResponse, HTTPError>, String?)? {
    guard case .finish(let finish) = action else { return nil }
    return (finish.result, finish.cancelling)
  }

  static func isNone(_ action: ExchangeMachine.Action) -> Bool {
    if case .none = action { true } else { false }
  }

  static func answered(_ answer: ExchangeMachine.RedirectAnswer) -> URLRequest?? {
    if case .answer(let request) = answer { .some(request) } else { nil }
  }

  /// A POST whose 307 the machine follows itself: the 3xx task has completed, the hop is asked for.
  static func startingHop(cookie: String? = nil, proposedCookie: String? = nil) -> (
    ExchangeMachine, URLRequest
  ) {
    let request = post(cookie: cookie)
    var machine = Self.machine(request)
    let (answer, action) = machine.redirect(
      redirection(307, to: "/next"), to: proposed("/next", from: request, cookie: proposedCookie))
    #expect(answered(answer) == .some(nil))
    #expect(isNone(action))
    #expect(machine.stateName == .awaitingHop)
    _ = machine.receive(response(307, headers: ["Location": "/next"]))
    #expect(isNone(machine.append(Data("3xx".utf8))))
    guard case .startHop(let hop) = machine.complete(error: nil, taskResponse: nil) else {
      Issue.record("expected startHop")
      return (machine, request)
    }
    #expect(machine.stateName == .startingHop)
    return (machine, hop)
  }

  // MARK: Head and body

  @Test func aResponseAndItsBodyAreDeliveredWhenTheTaskCompletes() throws {
    var machine = Self.machine()
    let (disposition, action) = machine.receive(Self.response(200, headers: ["Content-Length": "5"]))
    #expect(disposition == .allow)
    #expect(Self.isNone(action))
    #expect(Self.isNone(machine.append(Data("hel".utf8))))
    #expect(Self.isNone(machine.append(Data("lo".utf8))))
    let (result, cancelling) = try #require(Self.finished(machine.complete(error: nil, taskResponse: nil)))
    let response = try result.get()
    #expect(response.statusCode == 200)
    #expect(response.body == Data("hello".utf8))
    #expect(cancelling == nil)
    #expect(machine.stateName == .finished)
  }

  @Test func aDeclaredLengthAboveTheLimitIsRefusedWithoutCancellingTheTask() throws {
    var machine = Self.machine()
    let (disposition, action) = machine.receive(Self.response(200, headers: ["Content-Length": "11"]))
    #expect(disposition == .cancel)
    let (result, cancelling) = try #require(Self.finished(action))
    guard case .failure(.tooLarge(let limit, _)) = result else {
      Issue.record("expected tooLarge, got \(result)")
      return
    }
    #expect(limit == Self.limit)
    // Inside a callback with a completion handler: the `.cancel` disposition ends the task.
    #expect(cancelling == nil)
    #expect(Self.isNone(machine.complete(error: URLError(.cancelled), taskResponse: nil)))
  }

  @Test func aHeadResponseMayDeclareAnyLength() {
    var request = URLRequest(url: Self.url)
    request.httpMethod = "HEAD"
    var machine = Self.machine(request)
    let (disposition, action) = machine.receive(Self.response(200, headers: ["Content-Length": "1000"]))
    #expect(disposition == .allow)
    #expect(Self.isNone(action))
  }

  @Test func decompressedBytesPastTheLimitFailTheExchangeAndCancelTheTask() throws {
    var machine = Self.machine()
    let (disposition, _) = machine.receive(
      Self.response(200, headers: ["Content-Length": "4", "Content-Encoding": "gzip"]))
    #expect(disposition == .allow)
    #expect(Self.isNone(machine.append(Data(count: 6))))
    let (result, cancelling) = try #require(Self.finished(machine.append(Data(count: 5))))
    guard case .failure(.tooLarge) = result else {
      Issue.record("expected tooLarge, got \(result)")
      return
    }
    #expect(cancelling == "first")
    #expect(machine.cancelling)
    // The cancelled task completes: nothing more, and a late redirect question is not answered.
    #expect(Self.isNone(machine.append(Data(count: 1))))
    #expect(Self.isNone(machine.complete(error: URLError(.cancelled), taskResponse: nil)))
    let (answer, _) = machine.redirect(Self.redirection(302, to: "/b"), to: URLRequest(url: Self.url))
    guard case .withhold = answer else {
      Issue.record("expected the answer withheld")
      return
    }
  }

  @Test func aBodyOfExactlyTheLimitIsDelivered() throws {
    var machine = Self.machine()
    _ = machine.receive(Self.response(200))
    #expect(Self.isNone(machine.append(Data(count: Self.limit))))
    let (result, _) = try #require(Self.finished(machine.complete(error: nil, taskResponse: nil)))
    #expect(try result.get().body.count == Self.limit)
  }

  @Test func aResponseThatIsNotHTTPFailsAsABadServerResponse() throws {
    var machine = Self.machine()
    let (disposition, action) = machine.receive(
      URLResponse(url: Self.url, mimeType: nil, expectedContentLength: 0, textEncodingName: nil))
    #expect(disposition == .cancel)
    let (result, cancelling) = try #require(Self.finished(action))
    guard case .failure(.transport(let error, _)) = result else {
      Issue.record("expected a transport failure, got \(result)")
      return
    }
    #expect(error.code == .badServerResponse)
    #expect(cancelling == nil)
  }

  // MARK: Completion, once

  @Test func theCompletionIsReturnedOnce() throws {
    var machine = Self.machine()
    _ = machine.receive(Self.response(200))
    _ = try #require(Self.finished(machine.complete(error: nil, taskResponse: nil)))
    #expect(Self.isNone(machine.complete(error: nil, taskResponse: nil)))
    #expect(Self.isNone(machine.append(Data("late".utf8))))
    #expect(Self.isNone(machine.receive(Self.response(200, headers: ["Content-Length": "99"])).1))
    #expect(Self.isNone(machine.cancel()))
  }

  @Test func theCompletionGivenIsTheOneReturned() throws {
    let recorder = ResultRecorder()
    var machine = ExchangeMachine(
      task: "first", settings: Self.machine().settings, completion: { recorder.record($0) })
    _ = machine.receive(Self.response(204))
    guard case .finish(let finish) = machine.complete(error: nil, taskResponse: nil) else {
      Issue.record("expected finish")
      return
    }
    finish.completion(finish.result)
    #expect(recorder.statusCodes == [204])
  }

  @Test func afterCancelTheCompletionIsNeverReturned() {
    var machine = Self.machine()
    _ = machine.receive(Self.response(200))
    guard case .cancel(let task) = machine.cancel() else {
      Issue.record("expected the task cancelled")
      return
    }
    #expect(task == "first")
    #expect(machine.stateName == .finished)
    #expect(Self.isNone(machine.append(Data(count: 100))))
    #expect(Self.isNone(machine.complete(error: URLError(.cancelled), taskResponse: nil)))
    #expect(Self.isNone(machine.complete(error: nil, taskResponse: Self.response(301))))
  }

  @Test func aCancelAfterAFailureThatLeftTheTaskRunningStopsTheTaskOnce() throws {
    var machine = Self.machine(policy: .follow(maximum: 0))
    let (_, action) = machine.redirect(
      Self.redirection(302, to: "/a"), to: Self.proposed("/a", from: URLRequest(url: Self.url)))
    _ = try #require(Self.finished(action))
    // FoundationNetworking delivers the 3xx it was told not to follow: the task is still running.
    guard case .cancel(let task) = machine.cancel() else {
      Issue.record("expected the task cancelled")
      return
    }
    #expect(task == "first")
    #expect(Self.isNone(machine.cancel()))
  }

  // MARK: Malformed responses

  @Test func aConnectionEndingBeforeTheDeclaredBodyIsANetworkConnectionLost() throws {
    var machine = Self.machine()
    _ = machine.receive(Self.response(200, headers: ["Content-Length": "8"]))
    _ = machine.append(Data(count: 3))
    let (result, _) = try #require(
      Self.finished(machine.complete(error: URLError(.unknown), taskResponse: nil)))
    guard case .failure(.transport(let error, _)) = result else {
      Issue.record("expected a transport failure, got \(result)")
      return
    }
    #expect(error.code == .networkConnectionLost)
  }

  @Test func aRedirectionThatFoundationNetworkingCouldNotFollowIsTheAnswer() throws {
    var machine = Self.machine()
    let (result, _) = try #require(
      Self.finished(machine.complete(error: nil, taskResponse: Self.response(301))))
    #expect(try result.get().statusCode == 301)
  }

  @Test func aCompletionWithoutAResponseIsABadServerResponse() throws {
    var machine = Self.machine()
    let (result, _) = try #require(
      Self.finished(machine.complete(error: nil, taskResponse: Self.response(200))))
    guard case .failure(.transport(let error, _)) = result else {
      Issue.record("expected a transport failure, got \(result)")
      return
    }
    #expect(error.code == .badServerResponse)
  }

  @Test func aRefusedChallengeDeliversThe401() throws {
    var machine = Self.machine()
    _ = machine.receive(Self.response(401))
    machine.refuseChallenge()
    let (result, _) = try #require(
      Self.finished(machine.complete(error: URLError(.cancelled), taskResponse: nil)))
    #expect(try result.get().statusCode == 401)
  }

  @Test func aCancelledTaskWithoutARefusedChallengeFails() throws {
    var machine = Self.machine()
    _ = machine.receive(Self.response(401))
    let (result, _) = try #require(
      Self.finished(machine.complete(error: URLError(.cancelled), taskResponse: nil)))
    guard case .failure(.transport(let error, _)) = result else {
      Issue.record("expected a transport failure, got \(result)")
      return
    }
    #expect(error.code == .cancelled)
  }

  // MARK: Redirects followed by FoundationNetworking

  @Test func aHopWithoutABodyIsAnsweredWithTheRequestToFollow() throws {
    var machine = Self.machine()
    let (answer, action) = machine.redirect(
      Self.redirection(302, to: "/next"), to: Self.proposed("/next", from: URLRequest(url: Self.url)))
    let followed = try #require(Self.answered(answer) ?? nil)
    #expect(followed.url?.path == "/next")
    #expect(Self.isNone(action))
    #expect(machine.stateName == .receiving)
    _ = machine.receive(Self.response(200, url: followed.url!))
    _ = machine.append(Data("final".utf8))
    let (result, _) = try #require(Self.finished(machine.complete(error: nil, taskResponse: nil)))
    #expect(try result.get().body == Data("final".utf8))
  }

  @Test func doNotFollowAnswersNilAndDeliversThe3xx() throws {
    var machine = Self.machine(policy: .doNotFollow)
    let (answer, action) = machine.redirect(
      Self.redirection(302, to: "/next"), to: Self.proposed("/next", from: URLRequest(url: Self.url)))
    #expect(Self.answered(answer) == .some(nil))
    #expect(Self.isNone(action))
    _ = machine.receive(Self.response(302, headers: ["Location": "/next"]))
    _ = machine.append(Data("moved".utf8))
    let (result, _) = try #require(Self.finished(machine.complete(error: nil, taskResponse: nil)))
    let response = try result.get()
    #expect(response.statusCode == 302)
    #expect(response.body == Data("moved".utf8))
  }

  @Test func aHopPastTheLimitIsAnsweredNilAndFailsWithoutCancellingTheTask() throws {
    var machine = Self.machine(policy: .follow(maximum: 1))
    let first = machine.redirect(
      Self.redirection(302, to: "/a"), to: Self.proposed("/a", from: URLRequest(url: Self.url)))
    #expect((Self.answered(first.answer) ?? nil) != nil)
    let (answer, action) = machine.redirect(
      Self.redirection(302, to: "/b"), to: Self.proposed("/b", from: URLRequest(url: Self.url)))
    #expect(Self.answered(answer) == .some(nil))
    let (result, cancelling) = try #require(Self.finished(action))
    guard case .failure(.tooManyRedirects(let limit, _)) = result else {
      Issue.record("expected tooManyRedirects, got \(result)")
      return
    }
    #expect(limit == 1)
    #expect(cancelling == nil)
    #expect(!machine.cancelling)
  }

  @Test func aHopToAnotherSchemeIsAnsweredNilAndFails() throws {
    var machine = Self.machine()
    let (answer, action) = machine.redirect(
      Self.redirection(302, to: "file:///etc/passwd"),
      to: Self.proposed("/etc/passwd", from: URLRequest(url: Self.url)))
    #expect(Self.answered(answer) == .some(nil))
    let (result, cancelling) = try #require(Self.finished(action))
    guard case .failure(.invalidRequest) = result else {
      Issue.record("expected invalidRequest, got \(result)")
      return
    }
    #expect(cancelling == nil)
  }

  @Test func aCancelBeforeTheRedirectQuestionWithholdsTheAnswer() {
    var machine = Self.machine()
    guard case .cancel = machine.cancel() else {
      Issue.record("expected the task cancelled")
      return
    }
    let (answer, action) = machine.redirect(
      Self.redirection(302, to: "/next"), to: Self.proposed("/next", from: URLRequest(url: Self.url)))
    guard case .withhold = answer else {
      Issue.record("expected the answer withheld, got \(answer)")
      return
    }
    #expect(Self.isNone(action))
  }

  @Test func aCancelAfterTheRedirectAnswerCancelsTheTask() {
    var machine = Self.machine()
    let (answer, _) = machine.redirect(
      Self.redirection(302, to: "/next"), to: Self.proposed("/next", from: URLRequest(url: Self.url)))
    #expect((Self.answered(answer) ?? nil) != nil)
    guard case .cancel(let task) = machine.cancel() else {
      Issue.record("expected the task cancelled")
      return
    }
    #expect(task == "first")
    #expect(Self.isNone(machine.complete(error: URLError(.cancelled), taskResponse: nil)))
  }

  // MARK: Hops the exchange follows itself

  @Test func aHopThatRepeatsTheBodyIsFollowedWithATaskOfTheExchange() throws {
    var (machine, hop) = Self.startingHop()
    #expect(hop.httpMethod == "POST")
    #expect(hop.httpBody == Data("payload".utf8))
    #expect(hop.url?.path == "/next")
    guard case .resume(let task, let thenCancel) = machine.hopStarted("second") else {
      Issue.record("expected the hop's task resumed")
      return
    }
    #expect(task == "second")
    #expect(!thenCancel)
    #expect(machine.task == "second")
    #expect(machine.stateName == .receiving)
    _ = machine.receive(Self.response(200, url: hop.url!))
    _ = machine.append(Data("done".utf8))
    let (result, _) = try #require(Self.finished(machine.complete(error: nil, taskResponse: nil)))
    // The 3xx's own body is not part of the answer.
    #expect(try result.get().body == Data("done".utf8))
  }

  @Test func theBodyOfThe3xxOfAHopIsNotCounted() {
    let request = Self.post()
    var machine = Self.machine(request)
    _ = machine.redirect(Self.redirection(308, to: "/next"), to: Self.proposed("/next", from: request))
    let (disposition, action) = machine.receive(Self.response(308, headers: ["Content-Length": "1000"]))
    #expect(disposition == .allow)
    #expect(Self.isNone(action))
    #expect(Self.isNone(machine.append(Data(count: 1000))))
  }

  @Test func theHopsResponseIsLimited() throws {
    var (machine, _) = Self.startingHop()
    _ = machine.hopStarted("second")
    _ = machine.receive(Self.response(200))
    let (result, cancelling) = try #require(Self.finished(machine.append(Data(count: Self.limit + 1))))
    guard case .failure(.tooLarge) = result else {
      Issue.record("expected tooLarge, got \(result)")
      return
    }
    #expect(cancelling == "second")
  }

  @Test func theHopCarriesTheClientsOwnCookie() {
    let (_, hop) = Self.startingHop(cookie: "a=1", proposedCookie: "a=1; stored=2")
    #expect(hop.value(forHTTPHeaderField: "Cookie") == "a=1")
  }

  @Test func theHopDropsACookieTheClientDidNotSend() {
    let (_, hop) = Self.startingHop(proposedCookie: "stored=2")
    #expect(hop.value(forHTTPHeaderField: "Cookie") == nil)
  }

  @Test func aCancelBetweenHopsCancelsTheNewTask() {
    var (machine, _) = Self.startingHop()
    #expect(Self.isNone(machine.cancel()))
    guard case .resume(let task, let thenCancel) = machine.hopStarted("second") else {
      Issue.record("expected the hop's task resumed")
      return
    }
    #expect(task == "second")
    #expect(thenCancel)
    #expect(Self.isNone(machine.complete(error: URLError(.cancelled), taskResponse: nil)))
  }

  @Test func aCancelWhileThe3xxIsDeliveredStartsNoHop() {
    let request = Self.post()
    var machine = Self.machine(request)
    _ = machine.redirect(Self.redirection(307, to: "/next"), to: Self.proposed("/next", from: request))
    guard case .cancel(let task) = machine.cancel() else {
      Issue.record("expected the task cancelled")
      return
    }
    #expect(task == "first")
    #expect(Self.isNone(machine.complete(error: nil, taskResponse: nil)))
  }

  @Test func aFailureOfThe3xxTaskIsDeliveredAndStartsNoHop() throws {
    let request = Self.post()
    var machine = Self.machine(request)
    _ = machine.redirect(Self.redirection(307, to: "/next"), to: Self.proposed("/next", from: request))
    let (result, _) = try #require(
      Self.finished(machine.complete(error: URLError(.timedOut), taskResponse: nil)))
    guard case .failure(.transport(let error, _)) = result else {
      Issue.record("expected a transport failure, got \(result)")
      return
    }
    #expect(error.code == .timedOut)
  }

  @Test func aLateRedirectQuestionOfAFinishedExchangeIsAnsweredNil() throws {
    var machine = Self.machine(policy: .follow(maximum: 0))
    let (_, action) = machine.redirect(
      Self.redirection(302, to: "/a"), to: Self.proposed("/a", from: URLRequest(url: Self.url)))
    _ = try #require(Self.finished(action))
    let (answer, late) = machine.redirect(
      Self.redirection(302, to: "/b"), to: Self.proposed("/b", from: URLRequest(url: Self.url)))
    #expect(Self.answered(answer) == .some(nil))
    #expect(Self.isNone(late))
  }
}

/// Records the status codes of the results it is given.
final class ResultRecorder: @unchecked Sendable {
  // Safety: `codes` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var codes: [Int] = []

  var statusCodes: [Int] { lock.withLock { codes } }

  func record(_ result: Result<HTTPResponse, HTTPError>) {
    lock.withLock { codes.append((try? result.get().statusCode) ?? -1) }
  }
}
