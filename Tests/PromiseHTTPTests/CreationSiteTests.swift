import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Promises
import Testing

/// HTTP promises name the caller's line as their creation site, so broken-promise and
/// unhandled-rejection reports point at the user's code, not at the library's.
@Suite("HTTP promises: creation site", .timeLimit(.minutes(1)))
struct CreationSiteTests {
  private struct Item: Codable, Sendable { let id: Int }

  @Test func everyRequestMethodRecordsTheCallersLine() async throws {
    try await withServer({ router in
      for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] {
        router.on(method, "/thing") { _ in .respond(.json(#"{"id":1}"#)) }
      }
    }) { server in
      let client = server.client()
      let here = #fileID
      let sent: [(Promise<HTTPResponse>, Int)] = [
        (client.get("thing"), #line),
        (client.head("thing"), #line),
        (client.delete("thing"), #line),
        (client.post("thing"), #line),
        (client.post("thing", body: Data("x".utf8)), #line),
        (client.post("thing", json: Item(id: 1)), #line),
        (client.put("thing", body: Data("x".utf8)), #line),
        (client.put("thing", json: Item(id: 1)), #line),
        (client.patch("thing", body: Data("x".utf8)), #line),
        (client.patch("thing", json: Item(id: 1)), #line),
        (client.send(HTTPRequest(path: "thing")), #line),
      ]
      for (promise, line) in sent {
        #expect(promise.creationSite == CreationSite(fileID: here, line: line))
        _ = try await promise.value
      }
    }
  }

  @Test func aRefusedRequestRecordsTheCallersLine() throws {
    let client = HTTPClient(baseURL: URL(string: "http://127.0.0.1:9")!)
    let refused = client.get("../escape")
    let line = #line - 1
    #expect(refused.creationSite == CreationSite(fileID: #fileID, line: line))
    #expect(throws: HTTPError.self) { try refused.wait(timeout: .seconds(30)) }
  }

  @Test func decodingAndValidationRecordTheCallersLine() async throws {
    try await withServer({ router in
      router.on("GET", "/item") { _ in .respond(.json(#"{"id":7}"#)) }
    }) { server in
      let client = server.client()
      let response = client.get("item")
      let decoded = response.decode(Item.self)
      let decodedLine = #line - 1
      let validated = response.validate()
      let validatedLine = #line - 1
      let text = response.text()
      let textLine = #line - 1
      #expect(decoded.creationSite == CreationSite(fileID: #fileID, line: decodedLine))
      #expect(validated.creationSite == CreationSite(fileID: #fileID, line: validatedLine))
      #expect(text.creationSite == CreationSite(fileID: #fileID, line: textLine))
      #expect(try await decoded.value.id == 7)
      _ = try await validated.value
      _ = try await text.value
    }
  }
}
