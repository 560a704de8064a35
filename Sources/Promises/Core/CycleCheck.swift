import Dispatch

/// An iterator over the pending nodes a node waits on, transitively: its source or the
/// promise it adopted, their upstreams, and the inputs of aggregates.
///
/// Follows a single chain without allocating, and ends if the chain loops back on itself
/// (Brent's cycle detection: a checkpoint node moved at powers of two). At an aggregate it
/// switches to a walk with a visited set. Each node's pending state and upstream are read
/// together under that node's lock.
struct UpstreamWalk {
  private var node: _PromiseNode?
  private var checkpoint: _PromiseNode?
  private var power = 1
  private var sinceCheckpoint = 0
  /// The nodes still to visit once the walk has reached an aggregate (`nil` before).
  private var stack: [_PromiseNode]?
  private var seen = Set<ObjectIdentifier>()

  init(from start: _PromiseNode) {
    node = start
  }

  /// Whether `next()` would return `nil`.
  var isOver: Bool { node == nil && stack?.isEmpty ?? true }

  /// Returns the next pending node and its queue, or `nil` when the walk is over.
  mutating func next() -> (node: _PromiseNode, queue: DispatchQueue?)? {
    if stack != nil { return nextSlowly() }
    guard let current = node else { return nil }
    if let members = current.upstreamMembers {
      node = nil
      stack = members
      return nextSlowly()
    }
    let (pending, queue, upstream) = current.walkStep()
    guard pending else {
      node = nil
      return nil
    }
    if let upstream, upstream !== checkpoint {
      sinceCheckpoint += 1
      if sinceCheckpoint == power {
        checkpoint = current
        power &*= 2
        sinceCheckpoint = 0
      }
      node = upstream
    } else {
      node = nil
    }
    return (current, queue)
  }

  private mutating func nextSlowly() -> (node: _PromiseNode, queue: DispatchQueue?)? {
    while let current = stack!.popLast() {
      guard seen.insert(ObjectIdentifier(current)).inserted else { continue }
      if let members = current.upstreamMembers {
        stack!.append(contentsOf: members)
        continue
      }
      let (pending, queue, upstream) = current.walkStep()
      guard pending else { continue }
      if let upstream { stack!.append(upstream) }
      return (current, queue)
    }
    return nil
  }
}

/// A walk over what waits on a promise, transitively: the callbacks in its list and, for each
/// that is a promise (or settles one), that promise's own callbacks.
///
/// One node is visited per `step`; a chain without branches is followed without allocating.
/// It gives up (`unknown`) at a callback that cannot say what it settles.
struct DownstreamWalk {
  private var current: _PromiseNode?
  private var more: [_PromiseNode] = []

  /// What one step found.
  enum Step {
    /// The target waits on the start, transitively.
    case found
    /// Nothing more waits on the start: the target does not.
    case exhausted
    /// The walk goes on.
    case more
    /// A callback could not say what it settles: this walk cannot answer.
    case unknown
  }

  init(from start: _PromiseNode) {
    current = start
  }

  /// Visits one node: looks through the callbacks waiting on it for `target`.
  mutating func step(lookingFor target: _PromiseNode) -> Step {
    guard let node = current ?? more.popLast() else { return .exhausted }
    current = nil
    var found = false
    var unknown = false
    node.forEachWaitingCallback { callback in
      switch callback.downstream {
      case .none: break
      case .unknown: unknown = true
      case .node(let successor):
        if successor === target {
          found = true
        } else if current == nil {
          current = successor
        } else {
          more.append(successor)
        }
      }
    }
    if found { return .found }
    if unknown { return .unknown }
    return current == nil && more.isEmpty ? .exhausted : .more
  }
}

extension _PromiseNode {
  /// Whether `adopter` starting to adopt `inner` closes a cycle: whether `inner` waits on
  /// `adopter`, transitively.
  ///
  /// Walks from both ends at once, one node each per round: upstream from `inner` looking for
  /// `adopter`, downstream from `adopter` looking for `inner`. Either walk ending without
  /// finding the other end answers "no", so a check costs about twice the shorter of the two
  /// walks. Adopting the end of a long chain (each link adopting the one before) thus costs a
  /// step or two, where an upstream walk alone would visit the whole chain — quadratic time
  /// for a chain built that way. The downstream walk stops helping at a callback that cannot
  /// say what it settles (`Downstream.unknown`); the upstream walk then decides alone.
  ///
  /// The adopter must be registered on `inner`, and its `upstream` set to `inner`, before the
  /// check: of several promises closing a cycle at the same moment on several threads, the
  /// last to register then sees every other link of the cycle, in both directions.
  /// - Returns: Whether a cycle is closed, and how many rounds the check took.
  static func adoptionClosesCycle(
    adopter: _PromiseNode, inner: _PromiseNode
  ) -> (closesCycle: Bool, rounds: Int) {
    if adopter === inner { return (true, 0) }
    var up = UpstreamWalk(from: inner)
    var down = DownstreamWalk(from: adopter)
    var downIsUseful = true
    var rounds = 0
    while let (node, _) = up.next() {
      rounds += 1
      if node === adopter { return (true, rounds) }
      if up.isOver { return (false, rounds) }
      guard downIsUseful else { continue }
      switch down.step(lookingFor: inner) {
      case .found: return (true, rounds)
      case .exhausted: return (false, rounds)
      case .more: break
      case .unknown: downIsUseful = false
      }
    }
    return (false, rounds)
  }
}
