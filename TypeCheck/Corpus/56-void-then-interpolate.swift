// Multi-statement Void step on a queue, followed by a step interpolating its value ("\(value)").
import Promises

func chain_56() {
  loadConfig(from: "backup")
    .done(on: recorder.queue) { config in
      recorder.log("fps \(config["fps"] ?? 0)")
      recorder.log("bitrate \(config["bitrate"] ?? 0)")
    }
    .done { value in log("applied: \(value)") }
    .catch { error in showError(error) }
}
