// Throwing value step of several statements (Docs/Chaining.md's port parse), then arithmetic.
import Promises

func chain_13() {
  Promise("80a")
    .map { text in
      guard let port = Int(text) else { throw AppError.badInput(text) }
      return port
    }
    .map { port in port < 1_024 ? port + 8_000 : port }
    .done { port in log("listening on \(port)") }
    .catch { error in showError(error) }
}
