import Testing

@testable import Promises

/// `NodeList` is the one intrusive list of the core: a drain's run lists, a queue's outbox and
/// the callbacks a settlement hands on (a pending promise keeps them as a ring: removal and
/// walks are tested with `PromiseState`). Driven here as a value, without promises or queues.
@Suite("NodeList, the intrusive list as a value")
struct NodeListTests {
  private func nodes(_ count: Int) -> [_PromiseNode] {
    (0..<count).map { _ in _PromiseNode(queue: nil) }
  }

  /// Appends `nodes`, giving the list a reference to each, as `register` does.
  private func list(of nodes: [_PromiseNode]) -> NodeList {
    var list = NodeList()
    for node in nodes { list.append(Unmanaged.passRetained(node)) }
    return list
  }

  /// Empties `list`, taking back its references.
  private func drain(_ list: inout NodeList) -> [_PromiseNode] {
    var result: [_PromiseNode] = []
    while let node = list.popFirst() { result.append(node) }
    return result
  }

  @Test func aNewListIsEmpty() {
    var list = NodeList()
    #expect(list.isEmpty)
    #expect(list.count == 0)
    #expect(list.popFirst() == nil)
  }

  @Test func nodesComeOutInTheOrderTheyWentIn() {
    let all = nodes(5)
    var list = list(of: all)
    #expect(list.count == 5)
    #expect(list.head?.takeUnretainedValue() === all[0])
    #expect(list.tail?.takeUnretainedValue() === all[4])
    let out = drain(&list)
    #expect(zip(all, out).allSatisfy { $0 === $1 })
    #expect(list.isEmpty)
    #expect(list.tail == nil, "the tail goes with the last node")
    #expect(all.allSatisfy { $0.link == nil }, "a node in no list has no link")
  }

  @Test func takeAllMovesEveryNodeAndEmptiesTheList() {
    let all = nodes(3)
    var list = list(of: all)
    var taken = list.takeAll()
    #expect(list.isEmpty)
    #expect(drain(&taken).count == 3)
  }

  @Test func prependPutsNodesBackInFrontInTheirOrder() {
    let all = nodes(6)
    var back = list(of: Array(all[0..<3]))
    var list = list(of: Array(all[3..<6]))
    list.prepend(back.takeAll())
    #expect(zip(all, drain(&list)).allSatisfy { $0 === $1 })

    var empty = NodeList()
    empty.prepend(self.list(of: Array(all[0..<2])))
    #expect(empty.tail?.takeUnretainedValue() === all[1], "prepending to an empty list sets its tail")
    #expect(drain(&empty).count == 2)
  }

  @Test func theListOwnsOneReferenceToEachNodeAndReleaseAllDropsThem() {
    weak var first: _PromiseNode?
    weak var second: _PromiseNode?
    var list = NodeList()
    do {
      let a = _PromiseNode(queue: nil)
      let b = _PromiseNode(queue: nil)
      first = a
      second = b
      list.append(Unmanaged.passRetained(a))
      list.append(Unmanaged.passRetained(b))
    }
    #expect(first != nil && second != nil, "the list keeps its nodes alive")
    list.releaseAll()
    #expect(first == nil && second == nil)
    #expect(list.isEmpty)
  }
}
