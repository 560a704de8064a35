// TokenAuthenticator's fetch closure: a chain ending in a value step (token.value), then a request with it.
import PromiseHTTP
import Promises

func chain_47() {
  let tokens = HTTPClient(baseURL: configServer)
  let authenticator = TokenAuthenticator {
    tokens.post("device/register", json: Registration(deviceID: "A1B2"))
      .decode(Token.self)
      .map { token in token.value }
  }
  let api = HTTPClient(baseURL: configServer, configuration: .init(authenticator: authenticator))
  api.get("stream/config")
    .decode(StreamConfig.self)
    .done(on: recorder.queue) { config in recorder.apply(config) }
    .catch { error in showError(error) }
}
