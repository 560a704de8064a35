// HTTP decode, then a one-expression Void step on the recorder's queue: then(on:).
import PromiseHTTP
import Promises

func chain_16() {
  client.get("stream/config")
    .decode(StreamConfig.self)
    .done(on: recorder.queue) { config in recorder.apply(config) }
    .catch { error in showError(error) }
}
