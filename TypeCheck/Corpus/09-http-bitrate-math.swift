// HTTP: get + decode, then value steps with integer arithmetic and a Void step with interpolation.
import PromiseHTTP
import Promises

func chain_09() {
  client.get("stream/config")
    .decode(StreamConfig.self)
    .map { config in config.bitrateKbps * 1_000 / 8 }
    .map { bytesPerSecond in bytesPerSecond * 60 / 1_048_576 }
    .done { megabytes in print("\(megabytes) MB per minute") }
    .catch { error in print("no config: \(error)") }
}
