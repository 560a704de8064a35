// Docs/HTTP.md deadline chain: post, decode, multi-line promise step passing headers and a deadline, decode, Void.
import PromiseHTTP
import Promises

func chain_42() {
  let deadline = Deadline.after(.milliseconds(500))
  client.post("device/register", json: Registration(deviceID: "A1B2"), deadline: deadline)
    .decode(Token.self)
    .then { token in
      client.get("slow/config", headers: ["Authorization": "Bearer \(token.value)"], deadline: deadline)
    }
    .decode(StreamConfig.self)
    .done { config in print("ingest at \(config.ingestURL)") }
    .catch { error in showError(error) }
}
