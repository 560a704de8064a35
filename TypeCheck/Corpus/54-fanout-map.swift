// Static Promise.map with maxConcurrent and a promise closure, then count/interpolation.
import Promises

func chain_54() {
  let names = ["intro", "live", "q-and-a", "outro"]
  Promise.map(names, maxConcurrent: 2) { name in downloadThumbnail(name) }
    .map { files in "\(files.count) of \(names.count) thumbnails" }
    .done { line in log(line) }
    .catch { error in showError(error) }
}
