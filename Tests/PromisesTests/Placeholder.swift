import Dispatch
import Promises
import Testing

@Test func smoke() async throws {
  let (p, r) = Promise<Int>.pending()
  let q = p.then { $0 + 1 }.then { v in Promise(v * 2) }.recover { _ in 0 }
  r.fulfill(20)
  #expect(try await q.value == 42)
  #expect(try q.wait(timeout: 1) == 42)
  let all = Promise.all([Promise(1), Promise(2)])
  #expect(try await all.value == [1, 2])
  let het = Promise.all(Promise(1), Promise("a"))
  let t = try await het.value
  #expect(t.0 == 1 && t.1 == "a")
  var chain = Promise(0)
  for _ in 0..<100_000 { chain = chain.then { $0 + 1 } }
  #expect(try chain.wait(timeout: 30) == 100_000)
  let (bp, _) = Promise<Int>.pending()
  await #expect(throws: PromiseError.self) { try await bp.then { $0 }.value }
}
