import Testing

@testable import Promises

/// `NodeList` is the one intrusive list of the core: a promise's callbacks, a drain's run lists
/// and a queue's outbox. Driven here as a value, without promises or queues.
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

  @Test(arguments: [0, 2, 4])
  func removeUnlinksANodeAnywhereAndKeepsTheRest(index: Int) {
    let all = nodes(5)
    var list = list(of: all)
    let removed = list.remove(all[index])
    #expect(removed)
    Unmanaged.passUnretained(all[index]).release()  // the list's reference, now the caller's
    #expect(all[index].link == nil)
    let removedAgain = list.remove(all[index])
    #expect(!removedAgain, "a node is removed once")
    let rest = drain(&list)
    #expect(rest.count == 4)
    #expect(zip(all.enumerated().filter { $0.offset != index }.map(\.element), rest).allSatisfy { $0 === $1 })
  }

  @Test func removingTheLastNodeMovesTheTailBack() {
    let all = nodes(3)
    var list = list(of: all)
    let removed = list.remove(all[2])
    #expect(removed)
    Unmanaged.passUnretained(all[2]).release()
    list.append(Unmanaged.passRetained(all[2]))
    #expect(zip(all, drain(&list)).allSatisfy { $0 === $1 }, "appending after removing the tail")
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

  @Test func containsStopsAtTheFirstMatchAndForEachVisitsOldestFirst() {
    let all = nodes(4)
    var list = list(of: all)
    var visited: [ObjectIdentifier] = []
    let found = list.contains { node in
      visited.append(ObjectIdentifier(node))
      return node === all[1]
    }
    #expect(found)
    #expect(visited == [ObjectIdentifier(all[0]), ObjectIdentifier(all[1])])
    var order: [ObjectIdentifier] = []
    list.forEach { order.append(ObjectIdentifier($0)) }
    #expect(order == all.map(ObjectIdentifier.init))
    let none = list.contains { _ in false }
    #expect(!none)
    _ = drain(&list)
  }
}
