// The imports Docs/Combining.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.combining-imports
import Promises
// snippet.end
import Testing

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

@Suite("Docs/Combining.md: race, any, fan-out", .timeLimit(.minutes(1)))
struct CombiningMoreExamples {
  @Test func raceTakesTheFirstOutcome() async throws {
    // snippet.combining-race
    // snippet.hide
    let (mirror, mirrorResolver) = Promise<[String: Int]>.pending()
    // snippet.show
    let fastest = Promise.race([loadConfig(from: "backup"), mirror])
    // snippet.hide
    #expect(try await fastest.value == ["bitrate": 2_500, "fps": 30])
    mirrorResolver.fulfill([:])
    // snippet.end
  }

  @Test func raceRejectsWithTheFirstError() async throws {
    // snippet.combining-race-rejects
    // snippet.hide
    let (mirror, mirrorResolver) = Promise<[String: Int]>.pending()
    // snippet.show
    let fastest = Promise.race([loadConfig(from: "primary"), mirror])
    // rejected with ServiceError.serverDown: the first outcome wins, even an error
    // snippet.hide
    await #expect(throws: ServiceError.serverDown) { try await fastest.value }
    mirrorResolver.fulfill([:])
    // snippet.end
  }

  @Test func anyTakesTheFirstValue() async throws {
    // snippet.combining-any
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    let config = try await Promise.any([loadConfig(from: "primary"), loadConfig(from: "backup")]).value
    print(config["fps"] ?? 0)  // prints "30": the primary's rejection is ignored
    // snippet.hide
    #expect(output.lines == ["30"])
    // snippet.end
  }

  @Test func anyRejectsWhenAllDo() async throws {
    // snippet.combining-any-rejects
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    // snippet.show
    do {
      _ = try await Promise.any([loadConfig(from: "primary"), loadSettings()]).value
    } catch PromiseError.allRejected(let errors) {
      print("\(errors.count) errors")  // prints "2 errors"
    }
    // snippet.hide
    #expect(output.lines == ["2 errors"])
    // snippet.end
  }

  @Test func limitedFanOut() async throws {
    // snippet.combining-map
    let names = ["intro", "live", "q-and-a", "outro"]
    let thumbnails = Promise.map(names, maxConcurrent: 2) { name in downloadThumbnail(name) }
    // snippet.hide
    #expect(try await thumbnails.value == ["intro.jpg", "live.jpg", "q-and-a.jpg", "outro.jpg"])
    // snippet.end
  }

  @Test func limitedFanOutOfFactories() async throws {
    // snippet.combining-all-max-concurrent
    let steps = Promise<String>.all(
      maxConcurrent: 2,
      [
        { downloadThumbnail("intro") },
        { downloadThumbnail("live") },
        { downloadThumbnail("outro") },
      ])
    // snippet.hide
    #expect(try await steps.value == ["intro.jpg", "live.jpg", "outro.jpg"])
    // snippet.end
  }
}
