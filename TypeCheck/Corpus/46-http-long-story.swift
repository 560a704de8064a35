// Ten links: register, decode, token ternary guard, bearer get, decode, bitrate ternary arithmetic, Void on queue, always, catch.
import PromiseHTTP
import Promises

func chain_46() {
  spinner.show()
  client.post("device/register", json: Registration(deviceID: "A1B2"))
    .decode(Token.self)
    .validate { token in token.expiresIn > 60 && !token.value.isEmpty }
    .then { token in client.get("stream/config", headers: ["Authorization": "Bearer \(token.value)"]) }
    .decode(StreamConfig.self)
    .map { config in config.bitrateKbps > 5_000 ? config.bitrateKbps / 2 : config.bitrateKbps }
    .done(on: recorder.queue) { kbps in recorder.log("bitrate \(kbps) kbps") }
    .always { spinner.hide() }
    .catch { error in print("cannot record: \(error)") }
}
