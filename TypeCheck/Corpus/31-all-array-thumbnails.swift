// Array Promise.all over map(downloadThumbnail), joined, then a $0 print.
import Promises

func chain_31() {
  Promise.all(["intro", "live", "outro"].map(downloadThumbnail))
    .map { files in files.joined(separator: ", ") }
    .done { print($0) }
    .catch { error in showError(error) }
}
