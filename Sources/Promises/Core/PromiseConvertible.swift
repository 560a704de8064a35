/// A type that `recover` adopts when its closure returns it: `Promise` alone.
///
/// It exists for the type checker, not for you to conform to. `recover` takes a closure
/// returning "some `_PromiseConvertible`" rather than a `Promise<Value>`: Swift then chooses
/// the promise-returning overload only when the closure's body returns a promise. With a
/// concrete `Promise<Value>`, a closure of several statements returning nothing on a
/// `Promise<Void>` (`{ error in log(error); reset() }`), or one that only rethrows, matched
/// both overloads and did not build ("ambiguous use of 'recover'"). Docs/Design.md ("Why
/// these overloads") has the matrix of closure shapes and positions.
public protocol _PromiseConvertible<Value>: Sendable {
  /// The value of the promise that is adopted.
  associatedtype Value: Sendable

  /// The promise to adopt.
  var _promise: Promise<Value> { get }
}

extension Promise: _PromiseConvertible {
  /// This promise itself: what `recover` adopts when their closure returns it.
  @inlinable public var _promise: Promise<Value> { self }
}
