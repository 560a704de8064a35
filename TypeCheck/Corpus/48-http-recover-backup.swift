// HTTP recover with a promise (a backup request + decode), then a multi-statement Void step on a queue.
import PromiseHTTP
import Promises

func chain_48() {
  client.get("stream/config")
    .decode(StreamConfig.self)
    .recover { _ in client.get("stream/config-backup").decode(StreamConfig.self) }
    .done(on: recorder.queue) { config in
      recorder.apply(config)
      recorder.start()
      recorder.log("recording at \(config.bitrateKbps) kbps, \(config.fps ?? 30) fps")
    }
    .catch { error in showError(error) }
}
