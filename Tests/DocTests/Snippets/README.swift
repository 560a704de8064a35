// The imports README.md shows; DocImportsTests checks that this file has no other but Testing.
// snippet.readme-imports
import PromiseHTTP
import Promises
// snippet.end
import Testing

@Suite("README.md", .timeLimit(.minutes(1)))
struct ReadmeExamples {
  @Test func theStory() async throws {
    // snippet.readme-story
    // snippet.hide
    let output = DocOutput()
    let print = output.print
    let server = try DocServer.start()
    let configServer = server.baseURL
    let recorder = StreamRecorder()
    // snippet.show
    let client = HTTPClient(baseURL: configServer)

    let recording = client.post("device/register", json: Registration(deviceID: "A1B2"))
      .decode(Token.self)
      .then { token in client.get("stream/config", headers: ["Authorization": "Bearer \(token.value)"]) }
      .decode(StreamConfig.self)
      .done(on: recorder.queue) { config in
        recorder.apply(config)  // configured before recording starts
        recorder.start()
      }
      .catch { error in print("cannot record: \(error)") }
    // snippet.hide
    try await recording.value
    #expect(recorder.isRecordingOnItsQueue)
    #expect(output.lines.isEmpty)
    await server.stop()
    // snippet.end
  }
}
