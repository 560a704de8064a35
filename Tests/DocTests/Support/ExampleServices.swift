import Dispatch
import Promises

/// Stand-ins for the services the guides' examples call, so the examples run offline.

/// Errors of the example services.
enum ServiceError: Error, Equatable {
  case serverDown
  case notFound
}

/// Returns a configuration from `server` after a hop through a global queue; `"primary"` is down.
func loadConfig(from server: String) -> Promise<[String: Int]> {
  Promise { resolver in
    DispatchQueue.global().async {
      if server == "primary" {
        resolver.reject(ServiceError.serverDown)
      } else {
        resolver.fulfill(["bitrate": 2_500, "fps": 30])
      }
    }
  }
}
