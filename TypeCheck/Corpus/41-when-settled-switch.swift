// whenSettled with a switch over the Result (Docs/Chaining.md), after a value step with ??.
import Promises

func chain_41() {
  loadConfig(from: "backup")
    .map { config in (config["fps"] ?? 25) * 2 }
    .whenSettled { result in
      switch result {
      case .success(let fps): print("fps \(fps)")
      case .failure(let error): print("failed: \(error)")
      }
    }
}
