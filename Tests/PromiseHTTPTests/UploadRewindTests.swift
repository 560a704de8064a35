import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP

/// Bodies libcurl rewinds: FoundationNetworking then asks the session's delegate for a new body
/// stream (`urlSession(_:task:needNewBodyStream:)`), which `UploadBodySource.rewound(_:)` makes.
@Suite("Upload rewinds", .timeLimit(.minutes(1)))
struct UploadRewindTests {
  /// libcurl retries a request on a new connection by itself when a kept-alive connection it
  /// reused closes before any of the response arrives, and first rewinds a body it has begun to
  /// send (`Curl_retry_request`, then the seek callback FoundationNetworking sets). The retry
  /// policy is `.none`: the client's own retries play no part.
  @Test func aFormThatLibcurlResendsOnANewConnectionArrivesWholeOnce() async throws {
    let scratch = try UploadTests.Scratch()
    defer { scratch.remove() }
    var form = MultipartForm()
    form.append("take 7", name: "title")
    form.append(fileAt: try scratch.file("take-7.bin", UploadTests.pattern(300_000)), name: "recording")
    let expected = ByteChecksum(try MultipartFormTests.encoded(form, in: scratch))
    let posts = Counter()
    try await withServer({ router in
      router.on("GET", "/warm-up") { _ in .respond(.text("ok")) }
      // The first form is read to its end on the kept-alive connection, which then closes
      // without an answer.
      router.on("POST", "/forms", body: { _ in .consume() }) { request in
        posts.next() == 1 ? .closeImmediately : .respond(.text("\(request.consumedBody?.byteCount ?? -1)"))
      }
    }) { server in
      // URLSession: the socket transport opens a connection per request and reuses none.
      let client = server.client(engine: .urlSession)
      _ = try await client.get("warm-up").value
      let response = try await client.upload(.multipart(form), to: "forms").value
      #expect(response.statusCode == 200)
      #expect(response.text == "\(expected.byteCount)")
      let requests = server.requests
      try #require(requests.count == 3, "\(requests.map(\.path))")
      let (warmUp, closed, resent) = (requests[0], requests[1], requests[2])
      #expect(
        closed.connectionNumber == warmUp.connectionNumber, "the form went on the kept-alive connection")
      #expect(resent.connectionNumber != closed.connectionNumber)
      #expect(closed.consumedBody?.checksum == expected)
      #expect(resent.consumedBody?.checksum == expected, "the whole form, once, from its first byte")
      #expect(resent.consumedBody?.isComplete == true)
    }
  }
}
