import Foundation

/// Routes requests by method and exact path (the query is ignored) to actions.
///
/// Requests for an unknown path get `404`; a known path with another method gets `405` with an
/// `Allow` header. A `HEAD` request without a `HEAD` route uses the `GET` route (the server
/// then sends the headers only). Routes may be added while the server runs; the last registration for a
/// method and path wins. Actions run on the server's connection threads, possibly concurrently.
public final class Router: @unchecked Sendable {
  // Safe to share: `routes` is only read or written while `lock` is held, and the stored
  // closures are themselves `@Sendable`.
  private let lock = NSLock()
  private var routes: [String: [String: @Sendable (RecordedRequest) -> ServerAction]] = [:]

  /// Creates a router with no routes.
  public init() {}

  /// Registers `action` for requests with this method and exact path (without query).
  public func on(
    _ method: String, _ path: String,
    _ action: @escaping @Sendable (RecordedRequest) -> ServerAction
  ) {
    lock.lock()
    routes[path, default: [:]][method] = action
    lock.unlock()
  }

  /// Returns the handler to pass to ``LoopbackServer/init(handler:)``.
  public var handler: @Sendable (RecordedRequest) -> ServerAction {
    { [self] request in route(request) }
  }

  /// Returns the action for one request: the registered action's result, `404` or `405`.
  public func route(_ request: RecordedRequest) -> ServerAction {
    var path = request.pathWithoutQuery
    if let schemeEnd = path.range(of: "://") {
      // Absolute-form target ("http://host:port/p"): route on the path part.
      let rest = path[schemeEnd.upperBound...]
      path = rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
    }
    lock.lock()
    let methods = routes[path]
    lock.unlock()
    guard let methods else {
      return .respond(.text("no route for \(path)\n", status: 404))
    }
    guard let action = methods[request.method] ?? (request.method == "HEAD" ? methods["GET"] : nil)
    else {
      var response = ServerResponse.text("method \(request.method) not allowed\n", status: 405)
      response.headers.append(("Allow", methods.keys.sorted().joined(separator: ", ")))
      return .respond(response)
    }
    return action(request)
  }
}

/// A thread-safe call counter, for handlers that behave differently on the n-th call.
///
/// Create it outside the handler and call ``next()`` inside: `calls.next() == 1` is true on the
/// first request only, which makes "503 first, then 200" a one-liner.
public final class Counter: @unchecked Sendable {
  // Safe to share: `count` is only read or written while `lock` is held.
  private let lock = NSLock()
  private var count = 0

  /// Creates a counter at zero.
  public init() {}

  /// Counts one call and returns its number: 1 for the first call, 2 for the second, and so on.
  public func next() -> Int {
    lock.lock()
    defer { lock.unlock() }
    count += 1
    return count
  }

  /// Returns how many times ``next()`` has been called.
  public var value: Int {
    lock.lock()
    defer { lock.unlock() }
    return count
  }
}
