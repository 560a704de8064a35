import Foundation

/// Routes requests by method and exact path (the query is ignored) to actions.
///
/// Requests for an unknown path get `404`; a known path with another method gets `405` with an
/// `Allow` header. A `HEAD` request without a `HEAD` route uses the `GET` route (the server
/// then sends the headers only). Routes may be added while the server runs; the last registration for a
/// method and path wins. Actions run on the server's connection threads, possibly concurrently.
///
/// A route reads request bodies whole unless registered with ``on(_:_:body:_:)``, which decides
/// from the request's head how to read its body (for example streamed, for large uploads).
public final class Router: @unchecked Sendable {
  // Safe to share: `routes` is only read or written while `lock` is held, and the stored
  // closures are themselves `@Sendable`.
  private let lock = NSLock()
  private var routes: [String: [String: Route]] = [:]

  /// What one method and path do.
  private struct Route {
    let action: @Sendable (RecordedRequest) -> ServerAction
    let body: (@Sendable (RecordedRequest) -> RequestBodyHandling)?
  }

  /// Creates a router with no routes.
  public init() {}

  /// Registers `action` for requests with this method and exact path (without query).
  public func on(
    _ method: String, _ path: String,
    _ action: @escaping @Sendable (RecordedRequest) -> ServerAction
  ) {
    lock.lock()
    routes[path, default: [:]][method] = Route(action: action, body: nil)
    lock.unlock()
  }

  /// Registers `action` for requests with this method and exact path (without query), whose
  /// bodies are read as `body` says.
  ///
  /// `body` gets the request's head (its ``RecordedRequest/body`` empty) before any of the
  /// body is read; `action` gets the request afterwards, unless the handling answered or cut
  /// the connection itself.
  ///
  /// ```swift
  /// router.on("PUT", "/upload", body: { _ in .consume() }) { request in
  ///   .respond(.text("\(request.consumedBody!.checksum)\n"))
  /// }
  /// ```
  public func on(
    _ method: String, _ path: String,
    body: @escaping @Sendable (RecordedRequest) -> RequestBodyHandling,
    _ action: @escaping @Sendable (RecordedRequest) -> ServerAction
  ) {
    lock.lock()
    routes[path, default: [:]][method] = Route(action: action, body: body)
    lock.unlock()
  }

  /// Returns the handler to pass to ``LoopbackServer/init(handler:bodyHandling:)``.
  public var handler: @Sendable (RecordedRequest) -> ServerAction {
    { [self] request in route(request) }
  }

  /// Returns the body handling to pass to ``LoopbackServer/init(handler:bodyHandling:)``.
  public var bodyHandler: @Sendable (RecordedRequest) -> RequestBodyHandling {
    { [self] request in bodyHandling(for: request) }
  }

  /// Returns how to read one request's body: as its route says, else ``RequestBodyHandling/buffer``.
  public func bodyHandling(for request: RecordedRequest) -> RequestBodyHandling {
    guard let methods = methods(for: request).routes,
      let body = (methods[request.method] ?? (request.method == "HEAD" ? methods["GET"] : nil))?.body
    else { return .buffer }
    return body(request)
  }

  /// Returns the routed path of a request and the routes registered for it.
  private func methods(for request: RecordedRequest) -> (path: String, routes: [String: Route]?) {
    var path = request.pathWithoutQuery
    if let schemeEnd = path.range(of: "://") {
      // Absolute-form target ("http://host:port/p"): route on the path part.
      let rest = path[schemeEnd.upperBound...]
      path = rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
    }
    lock.lock()
    defer { lock.unlock() }
    return (path, routes[path])
  }

  /// Returns the action for one request: the registered action's result, `404` or `405`.
  public func route(_ request: RecordedRequest) -> ServerAction {
    let (path, methods) = methods(for: request)
    guard let methods else {
      return .respond(.text("no route for \(path)\n", status: 404))
    }
    guard let action = (methods[request.method] ?? (request.method == "HEAD" ? methods["GET"] : nil))?.action
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
