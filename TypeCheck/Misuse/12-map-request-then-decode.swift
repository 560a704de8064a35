// expect-error: use 'then' to adopt its outcome
// The story's request step written with map, followed by decode.
import PromiseHTTP
import Promises

func misuse_12() {
  fetchToken(deviceID: "A1B2")
    .map { token in client.get("stream/config", headers: ["Authorization": "Bearer \(token.value)"]) }
    .decode(StreamConfig.self)
    .catch { error in showError(error) }
}
