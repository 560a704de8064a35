// expect-error: 'done' for one that returns nothing
// The README story as it was written: the last step, of several statements, with then.
import PromiseHTTP
import Promises

func misuse_09() {
  client.post("device/register", json: Registration(deviceID: "A1B2"))
    .decode(Token.self)
    .then { token in client.get("stream/config", headers: ["Authorization": "Bearer \(token.value)"]) }
    .decode(StreamConfig.self)
    .then(on: recorder.queue) { config in
      recorder.apply(config)
      recorder.start()
    }
    .catch { error in print("cannot record: \(error)") }
}
