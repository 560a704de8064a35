/// A first-in, first-out list of nodes linked intrusively through `_PromiseNode.link`: the one
/// list type of the core.
///
/// It is a drain's run lists (`Drain`), a queue's outbox (`Outbox`) and what a promise's
/// settlement hands on (`PromiseState` keeps the same nodes as a ring while pending). Linking
/// allocates nothing: each node carries its own `link`.
///
/// Ownership (see Docs/Design.md, "Invariants"): the list owns one strong reference to each node
/// in it, taken by whoever appends (`Unmanaged.passRetained`) and handed on by whoever removes a
/// node (`popFirst`, `takeAll`). The links themselves are unmanaged, so moving a node from one
/// list to another costs no reference counting. A node is in at most one list at a time, and
/// its `link` is `nil` whenever it is in none; whoever owns the list (a promise's lock, a
/// drain's thread, an outbox's lock) is the only one touching the links of its nodes.
@usableFromInline
struct NodeList: Sendable {
  /// A node in a list, which owns one reference to it.
  @usableFromInline typealias Node = Unmanaged<_PromiseNode>

  /// The oldest node; `nil` when empty.
  @usableFromInline private(set) var head: Node?
  /// The newest node; `nil` when empty.
  @usableFromInline private(set) var tail: Node?

  @usableFromInline
  init() {}

  /// A list of the nodes from `oldest` to `newest`, already linked, whose last `link` is `nil`.
  init(oldest: Node, newest: Node) {
    head = oldest
    tail = newest
  }

  /// Whether the list holds no node.
  @inline(__always)
  var isEmpty: Bool { head == nil }

  /// Adds `node` at the end; the list takes over the caller's reference to it.
  @inline(__always)
  mutating func append(_ node: Node) {
    // A node in no list has a `nil` link (see the type's note): nothing to clear.
    assert(node._withUnsafeGuaranteedRef { $0.link == nil }, "Promises: a node joined two lists")
    if let tail {
      tail._withUnsafeGuaranteedRef { $0.link = node }
    } else {
      head = node
    }
    tail = node
  }

  /// Removes the oldest node and hands the list's reference to it to the caller.
  @inline(__always)
  mutating func popFirstUnmanaged() -> Node? {
    guard let first = head else { return nil }
    first._withUnsafeGuaranteedRef { node in
      head = node.link
      node.link = nil
    }
    if head == nil { tail = nil }
    return first
  }

  /// Removes the oldest node; the list's reference to it goes to the caller.
  @inline(__always)
  mutating func popFirst() -> _PromiseNode? {
    popFirstUnmanaged()?.takeRetainedValue()
  }

  /// Empties the list and returns what it held, in order (with the references).
  @inline(__always)
  mutating func takeAll() -> NodeList {
    defer { self = NodeList() }
    return self
  }

  /// Puts `other`'s nodes in front of this list's, in their order (with their references).
  mutating func prepend(_ other: NodeList) {
    guard let otherHead = other.head, let otherTail = other.tail else { return }
    otherTail._withUnsafeGuaranteedRef { $0.link = head }
    if tail == nil { tail = otherTail }
    head = otherHead
  }

  /// The number of nodes (a walk).
  var count: Int {
    var count = 0
    var current = head
    while let node = current {
      count += 1
      current = node._withUnsafeGuaranteedRef { $0.link }
    }
    return count
  }

  /// Drops the references the list holds and empties it, for a list nobody will run.
  mutating func releaseAll() {
    while let node = popFirstUnmanaged() { node.release() }
  }
}
