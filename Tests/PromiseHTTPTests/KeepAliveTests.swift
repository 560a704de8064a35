import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP
@testable import Promises

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// How many requests each connection has carried, as the server's handler sees them.
private final class PerConnection: Sendable {
  private let counts = LockedBox<[Int: Int]>([:])

  /// Counts `request` and returns how many its connection has carried, this one included.
  func count(_ request: RecordedRequest) -> Int {
    counts.withLock { counts in
      counts[request.connectionNumber, default: 0] += 1
      return counts[request.connectionNumber]!
    }
  }
}

/// The socket transport's kept-alive connections: reused after a response read to its framed
/// end, never after anything else, and never read for an answer nobody asked for.
@Suite(
  "Kept-alive connections", .timeLimit(.minutes(2)),
  .enabled(if: socketTransportServesLoopback, "a proxy in the environment turns the socket transport off"))
struct KeepAliveTests {
  @Test func aThousandSequentialRequestsShareOneConnection() async throws {
    try await withServer({ router in
      router.on("GET", "/n") { request in .respond(.json("{\"n\":\"\(request.query ?? "")\"}")) }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      for index in 0..<1_000 {
        let response = try await client.get("n", query: [URLQueryItem(name: "i", value: "\(index)")]).value
        guard response.text == "{\"n\":\"i=\(index)\"}" else {
          Issue.record("request \(index) got \(response.text)")
          return
        }
      }
      #expect(server.server.connectionCount == 1)
      #expect(Set(server.requests.map(\.connectionNumber)).count == 1)
      expectSent(over: .automatic, Array(server.requests.prefix(1)))
    }
  }

  @Test func chunkedAndEmptyBodiesAndHeadKeepTheConnection() async throws {
    try await withServer({ router in
      router.on("GET", "/chunked") { _ in
        .chunked(.text(String(repeating: "c", count: 10_000)), chunkSize: 777)
      }
      router.on("GET", "/empty") { _ in .respond(ServerResponse(status: 204)) }
      router.on("GET", "/text") { _ in .respond(.text("text")) }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      let chunked = try await client.get("chunked").value
      let empty = try await client.get("empty").value
      let head = try await client.head("text").value
      let text = try await client.get("text").value
      #expect(chunked.body.count == 10_000)
      #expect(empty.statusCode == 204)
      #expect(head.body.isEmpty)
      #expect(text.text == "text")
      #expect(server.server.connectionCount == 1)
    }
  }

  @Test func connectionCloseFromEitherSideEndsTheConnection() async throws {
    try await withServer({ router in
      router.on("GET", "/closing") { _ in
        .respond(ServerResponse(status: 200, headers: [("Connection", "close")], body: Array("bye".utf8)))
      }
      router.on("GET", "/text") { _ in .respond(.text("text")) }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      #expect(try await client.get("closing").value.text == "bye")
      #expect(try await client.get("text", headers: ["Connection": "close"]).value.text == "text")
      #expect(try await client.get("text").value.text == "text")
      #expect(server.server.connectionCount == 3)
    }
  }

  @Test func aFailedExchangeEndsTheConnection() async throws {
    try await withServer({ router in
      router.on("GET", "/big") { _ in
        .chunked(.text(String(repeating: "z", count: 4 << 20)), chunkSize: 64 << 10)
      }
      router.on("GET", "/text") { _ in .respond(.text("text")) }
    }) { server async throws in
      let client = server.client(maximumResponseSize: 1 << 20, engine: .automatic)
      let (result, _) = await outcome(of: client.get("big"))
      guard case .tooLarge? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(try await client.get("text").value.text == "text")
      #expect(Set(server.requests.map(\.connectionNumber)).count == 2)
    }
  }

  @Test func bytesAfterTheResponseAreNeverReadAsTheNextAnswer() async throws {
    // The first answer declares 2 bytes and sends a whole second response after them, on a
    // connection the server holds open: a client that reused it would read "stale".
    let planted = "okHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"
    try await withServer({ router in
      router.on("GET", "/first") { _ in .wrongContentLength(.text(planted), declared: 2) }
      router.on("GET", "/second") { _ in .respond(.text("fresh")) }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      #expect(try await client.get("first").value.text == "ok")
      #expect(try await client.get("second").value.text == "fresh")
      #expect(server.server.connectionCount == 2)
    }
  }

  @Test func aResponseWithAKeepAliveTimeoutOfOneSecondIsNotKept() async throws {
    try await withServer({ router in
      router.on("GET", "/short") { _ in
        .respond(ServerResponse(status: 200, headers: [("Keep-Alive", "timeout=1")], body: Array("s".utf8)))
      }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      _ = try await client.get("short").value
      _ = try await client.get("short").value
      #expect(server.server.connectionCount == 2)
    }
  }

  @Test func aGetOnAKeptConnectionTheServerDroppedGoesAgainOnANewOne() async throws {
    let perConnection = PerConnection()
    try await withServer({ router in
      router.on("GET", "/text") { request in
        // The first connection's second request finds it closed, as after a server's idle timeout.
        perConnection.count(request) == 2 ? .closeImmediately : .respond(.text("text"))
      }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      #expect(try await client.get("text").value.text == "text")
      #expect(try await client.get("text").value.text == "text")
      let requests = server.requests
      #expect(requests.count == 3)
      #expect(requests.count == 3 && requests[0].connectionNumber == requests[1].connectionNumber)
      #expect(requests.count == 3 && requests[2].connectionNumber != requests[1].connectionNumber)
    }
  }

  @Test func aPostOnAKeptConnectionTheServerDroppedIsNotRepeated() async throws {
    let perConnection = PerConnection()
    try await withServer({ router in
      router.on("GET", "/text") { request in
        _ = perConnection.count(request)
        return .respond(.text("text"))
      }
      router.on("POST", "/order") { request in
        perConnection.count(request) == 2 ? .closeImmediately : .respond(.text("ordered"))
      }
    }) { server async throws in
      let client = server.client(engine: .automatic)
      #expect(try await client.get("text").value.text == "text")
      let (result, _) = await outcome(of: client.post("order", json: ["item": 1]))
      guard case .transport(let error, _)? = httpError(result) else {
        Issue.record("another outcome: \(result)")
        return
      }
      #expect(error.code == .networkConnectionLost)
      #expect(server.requests.count == 2, "the POST was sent once")
    }
  }

  @Test func idleConnectionsAreBoundedPerOrigin() async throws {
    try await withServer({ _ in }) { server async throws in
      let pool = SocketConnectionPool(maximumIdlePerHost: 2, idleTimeout: 600)
      let key = SocketConnectionPool.Key(scheme: "http", host: "127.0.0.1", port: server.server.port)
      for _ in 0..<3 {
        let connection = SocketConnection(idleTimeout: 5)
        try connection.connect(host: "127.0.0.1", port: server.server.port)
        pool.put(connection, for: key)
      }
      #expect(pool.idleCount == 2, "the oldest went when the origin had its fill")
      #expect(await eventually { server.server.openConnectionCount == 2 }, "and was closed")
      pool.closeAll()
      #expect(await eventually { server.server.openConnectionCount == 0 })
    }
  }

  @Test func idleConnectionsAreClosedAfterTheIdleTimeout() async throws {
    try await withServer({ _ in }) { server async throws in
      let pool = SocketConnectionPool(maximumIdlePerHost: 2, idleTimeout: 0.2)
      let key = SocketConnectionPool.Key(scheme: "http", host: "127.0.0.1", port: server.server.port)
      let connection = SocketConnection(idleTimeout: 5)
      try connection.connect(host: "127.0.0.1", port: server.server.port)
      pool.put(connection, for: key)
      #expect(await eventually { pool.idleCount == 0 }, "expired connections are swept")
      #expect(await eventually { server.server.openConnectionCount == 0 }, "and closed")
      #expect(pool.take(key) == nil)
    }
  }

  @Test func aConnectionTheServerClosedWhileIdleIsNotTaken() async throws {
    try await withServer({ router in
      router.on("GET", "/text") { _ in .respond(.text("text")) }
    }) { server async throws in
      let pool = SocketConnectionPool(maximumIdlePerHost: 2)
      let key = SocketConnectionPool.Key(scheme: "http", host: "127.0.0.1", port: server.server.port)
      let connection = SocketConnection(idleTimeout: 5)
      try connection.connect(host: "127.0.0.1", port: server.server.port)
      pool.put(connection, for: key)
      await offThePool { server.server.stop() }
      #expect(await eventually { !connection.isQuietWhileIdle })
      #expect(pool.take(key) == nil)
      #expect(pool.idleCount == 0)
    }
  }
}
