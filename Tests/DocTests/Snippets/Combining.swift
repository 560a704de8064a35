import Dispatch
import Promises
import Testing

/// A thumbnail download that fails for one name.
func downloadThumbnail(_ name: String) -> Promise<String> {
  Promise { resolver in
    DispatchQueue.global().async {
      if name == "missing" {
        resolver.reject(ServiceError.notFound)
      } else {
        resolver.fulfill("\(name).jpg")
      }
    }
  }
}

@Suite("Docs/Combining.md", .timeLimit(.minutes(1)))
struct CombiningExamples {
  @Test func allKeepsInputOrder() async throws {
    // snippet.combining-all
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let thumbnails = Promise.all(["intro", "live", "outro"].map(downloadThumbnail))

    print(try await thumbnails.value)  // prints ["intro.jpg", "live.jpg", "outro.jpg"]
    // snippet.hide
    #expect(output.lines == [#"["intro.jpg", "live.jpg", "outro.jpg"]"#])
    // snippet.end
  }

  @Test func allFailsFast() async throws {
    // snippet.combining-all-rejects
    let thumbnails = Promise.all(["intro", "missing", "outro"].map(downloadThumbnail))
    // rejected with ServiceError.notFound, as soon as "missing" fails
    // snippet.hide
    await #expect(throws: ServiceError.notFound) { try await thumbnails.value }
    // snippet.end
  }

  @Test func heterogeneousAll() async throws {
    // snippet.combining-all-tuple
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let token = Promise { try await fetchToken(deviceID: "A1B2") }
    let config = loadConfig(from: "backup")
    let thumbnail = downloadThumbnail("intro")

    let (bearer, settings, image) = try await Promise.all(token, config, thumbnail).value
    print("\(bearer) \(settings["fps"] ?? 0) \(image)")  // prints "token-for-A1B2 30 intro.jpg"
    // snippet.hide
    #expect(output.lines == ["token-for-A1B2 30 intro.jpg"])
    // snippet.end
  }

  @Test func allSettledReportsEveryOutcome() async throws {
    // snippet.combining-all-settled
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let outcomes = try await Promise.allSettled(["intro", "missing"].map(downloadThumbnail)).value
    for outcome in outcomes {
      switch outcome {
      case .success(let file): print("got \(file)")
      case .failure(let error): print("failed: \(error)")
      }
    }
    // prints "got intro.jpg", then "failed: notFound"
    // snippet.hide
    #expect(output.lines == ["got intro.jpg", "failed: notFound"])
    // snippet.end
  }
}
