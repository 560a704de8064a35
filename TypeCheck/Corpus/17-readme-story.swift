// The README chain: post json, decode, promise step with a Bearer header, decode, multi-statement Void step on a queue, catch.
import PromiseHTTP
import Promises

func chain_17() {
  let recording = client.post("device/register", json: Registration(deviceID: "A1B2"))
    .decode(Token.self)
    .then { token in client.get("stream/config", headers: ["Authorization": "Bearer \(token.value)"]) }
    .decode(StreamConfig.self)
    .done(on: recorder.queue) { config in
      recorder.apply(config)  // configured before recording starts
      recorder.start()
    }
    .catch { error in print("cannot record: \(error)") }
  _ = recording
}
