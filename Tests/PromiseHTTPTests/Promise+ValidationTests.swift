import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Testing

@Suite("Promise+Validation", .timeLimit(.minutes(1)))
struct PromiseValidationTests {
  @Test func aStatusOutside2xxRejectsWithStatusHeadersExcerptAndURL() async throws {
    try await withServer({ router in
      router.on("GET", "/missing") { _ in
        .respond(
          ServerResponse(
            status: 404, headers: [("X-Trace", "t-1")], body: Array(largeJSON(bytes: 10_000).utf8)))
      }
    }) { server in
      let (result, elapsed) = await outcome(of: server.client().get("missing"))
      report("404 (validation on by default)", result, elapsed)
      guard case .unacceptableStatus(let status, let headers, let excerpt, let url)? = httpError(result)
      else { return }
      #expect(status == 404)
      #expect(headers["x-trace"] == "t-1")
      #expect(excerpt.hasPrefix("{\"padding\":\"xxx"))
      #expect(excerpt.count <= HTTPError.excerptLimit + 1)
      #expect(url.path == "/missing")
    }
  }

  @Test func aClientCanAcceptEveryStatusAndValidateLater() async throws {
    try await withServer({ router in
      router.on("GET", "/teapot") { _ in .respond(.text("short and stout", status: 418)) }
      router.on("GET", "/accepted") { _ in .respond(.text("later", status: 202)) }
    }) { server in
      let client = server.client(acceptableStatusCodes: 100..<600)
      let status = try await client.get("teapot").value.statusCode
      #expect(status == 418)
      let (result, _) = await outcome(of: client.get("teapot").validate())
      #expect(httpError(result)?.statusCode == 418)
      let (narrow, _) = await outcome(of: client.get("accepted").validate(statusCodes: 200..<201))
      #expect(httpError(narrow)?.statusCode == 202)
    }
  }

  @Test func contentTypeValidationIgnoresParametersAndCase() async throws {
    try await withServer({ router in
      router.on("GET", "/json") { _ in
        .respond(
          ServerResponse(
            headers: [("Content-Type", "Application/JSON; charset=utf-8")], body: Array("{}".utf8)))
      }
      router.on("GET", "/html") { _ in .respond(ServerResponse(headers: [("Content-Type", "text/html")])) }
    }) { server in
      let client = server.client()
      let jsonStatus = try await client.get("json").validate(contentTypes: ["application/json"]).value
        .statusCode
      #expect(jsonStatus == 200)
      let (result, _) = await outcome(of: client.get("html").validate(contentTypes: ["application/json"]))
      #expect(httpError(result)?.statusCode == 200)
    }
  }
}
