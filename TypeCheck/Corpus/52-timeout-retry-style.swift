// timeout on a request chain, a value step with a ternary of arithmetic, then recover with a value literal.
import PromiseHTTP
import Promises

func chain_52() {
  client.get("stream/config")
    .decode(StreamConfig.self)
    .timeout(.seconds(5))
    .map { config in config.tags.contains("low-latency") ? config.bitrateKbps : config.bitrateKbps * 2 }
    .recover { _ in 1_000 }
    .done { kbps in log("\(kbps) kbps") }
    .catch { error in showError(error) }
}
