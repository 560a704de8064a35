import Foundation
import LoopbackHTTPServer
import PromiseHTTP
import Testing

private struct Catalog: Decodable, Sendable {
  struct Item: Decodable, Sendable {
    let id: Int
  }
  let items: [Item]
}

@Suite("Promise+Decoding", .timeLimit(.minutes(1)))
struct PromiseDecodingTests {
  @Test func decodesJSON() async throws {
    try await withServer({ router in
      router.on("GET", "/catalog") { _ in .respond(.json("{\"items\":[{\"id\":1},{\"id\":2}]}")) }
    }) { server in
      let catalog = try await server.client().get("catalog").decode(Catalog.self).value
      #expect(catalog.items.map(\.id) == [1, 2])
    }
  }

  @Test func invalidJSONNamesTheTypeAndTheURL() async throws {
    try await withServer({ router in
      router.on("GET", "/broken") { _ in .respond(.json("{\"items\": [")) }
    }) { server in
      let start = ContinuousClock.now
      let (result, elapsed) = await outcome(
        of: server.client().get("broken").decode(Catalog.self), since: start)
      report("invalid JSON", result, elapsed)
      guard case .decoding(let type, _, let detail, let excerpt, let url)? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(type == "Catalog")
      #expect(detail.contains("invalid JSON"))
      #expect(excerpt == "{\"items\": [")
      #expect(url.path == "/broken")
    }
  }

  @Test func aWrongTypeNamesTheCodingPath() async throws {
    try await withServer({ router in
      router.on("GET", "/catalog") { _ in .respond(.json("{\"items\":[{\"id\":1},{\"id\":\"two\"}]}")) }
      router.on("GET", "/partial") { _ in .respond(.json("{\"items\":[{}]}")) }
    }) { server in
      let client = server.client()
      let (mismatch, _) = await outcome(of: client.get("catalog").decode(Catalog.self))
      guard case .decoding(_, let path, _, _, _)? = httpError(mismatch) else {
        Issue.record("another outcome: \(mismatch)")
        return
      }
      #expect(path == "items[1].id")
      let (missing, _) = await outcome(of: client.get("partial").decode(Catalog.self))
      guard case .decoding(_, let missingPath, let detail, _, _)? = httpError(missing) else {
        Issue.record("another outcome: \(missing)")
        return
      }
      #expect(missingPath == "items[0].id")
      #expect(detail.contains("missing key 'id'"))
      #expect(
        HTTPError.decoding(
          type: "Catalog", codingPath: "items[1].id", detail: "", bodyExcerpt: "", url: client.baseURL
        )
        .description.contains("Catalog at 'items[1].id'"))
    }
  }

  @Test func aRejectedResponseSkipsDecoding() async throws {
    try await withServer({ router in
      router.on("GET", "/down") { _ in .respond(.text("maintenance", status: 503)) }
    }) { server in
      let (result, _) = await outcome(of: server.client().get("down").decode(Catalog.self))
      #expect(httpError(result)?.statusCode == 503)
    }
  }

  @Test func textDecodesUTF8AndRefusesInvalidBytes() async throws {
    try await withServer({ router in
      router.on("GET", "/hello") { _ in .respond(.text("héllo")) }
      router.on("GET", "/binary") { _ in .respond(ServerResponse(body: [0xFF, 0xFE, 0x00])) }
    }) { server in
      let client = server.client()
      let text = try await client.get("hello").text().value
      #expect(text == "héllo")
      let (result, _) = await outcome(of: client.get("binary").text())
      guard case .decoding(let type, _, _, _, _)? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(type == "String")
    }
  }
}
