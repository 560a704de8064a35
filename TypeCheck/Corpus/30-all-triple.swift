// Promise.all(a, b, c) of three types (Docs/Combining.md), value step on the tuple, then Void.
import Promises

func chain_30() {
  Promise.all(fetchToken(deviceID: "A1B2"), loadConfig(from: "backup"), downloadThumbnail("intro"))
    .map { bearer, settings, image in "\(bearer.value) \(settings["fps"] ?? 0) \(image)" }
    .done { line in print(line) }
    .catch { error in showError(error) }
}
