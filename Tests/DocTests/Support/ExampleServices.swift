import Dispatch
import Foundation
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

/// A service that fails with `ServiceError.serverDown` for its first `failures` calls.
final class FlakyService: @unchecked Sendable {
  // Safety: `calls` is only accessed while `lock` is held.
  private let lock = NSLock()
  private var calls = 0
  private let failures: Int

  init(failures: Int) {
    self.failures = failures
  }

  /// The number of calls so far.
  var callCount: Int { lock.withLock { calls } }

  /// Returns a configuration, or a rejection while failures remain.
  func loadConfig() -> Promise<[String: Int]> {
    let call = lock.withLock {
      calls += 1
      return calls
    }
    return call <= failures
      ? Promise(error: ServiceError.serverDown) : Promise(["bitrate": 2_500, "fps": 30])
  }
}

/// A completion-handler API of the old style, answering on a global queue.
func loadProfile(id: String, completion: @escaping @Sendable (String?, (any Error)?) -> Void) {
  DispatchQueue.global().async {
    id.isEmpty ? completion(nil, ServiceError.notFound) : completion("profile of \(id)", nil)
  }
}

/// A completion-handler API that reports a `Result`.
func loadAvatar(id: String, completion: @escaping @Sendable (Result<String, any Error>) -> Void) {
  DispatchQueue.global().async { completion(.success("avatar-\(id).png")) }
}

/// A thumbnail download that fails for one name.
func downloadThumbnail(_ name: String) -> Promise<String> {
  Promise { resolver in
    DispatchQueue.global().async {
      if name == "missing" {
        resolver.reject(ServiceError.notFound)
      } else {
        resolver.fulfill("\(name).jpg")
      }
    }
  }
}

extension StreamRecorder {
  /// Whether the recorder is recording, read on its queue (for the README's hidden assertion:
  /// the README does not show `import Dispatch`, whose `sync` this uses).
  var isRecordingOnItsQueue: Bool { queue.sync { isRecording } }
}
