// HTTP text(), a value step with split/filter/$0/count, then a ternary with interpolation.
import PromiseHTTP
import Promises

func chain_44() {
  client.get("stream/log")
    .text()
    .map { text in text.split(separator: "\n").filter { $0.hasPrefix("E") }.count }
    .map { errors in errors == 0 ? "clean" : "\(errors) errors" }
    .done { summary in print(summary) }
    .catch { error in showError(error) }
}
