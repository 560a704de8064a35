import Dispatch
import Testing

@testable import Promises

#if canImport(Glibc)
  import Glibc

  /// glibc's `malloc_usable_size` (declared in `<malloc.h>`, which the Glibc module leaves out).
  @_silgen_name("malloc_usable_size")
  private func malloc_usable_size(_ pointer: UnsafeMutableRawPointer?) -> Int

  /// A `then` link is one object that must stay inside glibc's 96-byte chunks (88 usable
  /// bytes): the next size up costs 16 bytes per link in every chain (Docs/Performance.md,
  /// deep-chain). The field order of `Promise` and `PromiseState`, and the one word the state
  /// uses for its callbacks and its error, are what keep it there.
  @Suite("Link size")
  struct LinkSizeTests {
    /// The bytes glibc set aside for `object`'s allocation.
    private func allocatedBytes(_ object: AnyObject) -> Int {
      malloc_usable_size(Unmanaged.passUnretained(object).toOpaque())
    }

    @Test func aThenLinkFitsInANinetySixByteChunk() {
      let (source, resolver) = Promise<Int>.pending()
      let link = source.map(on: .promises) { $0 + 1 }
      #expect(allocatedBytes(link) <= 88)
      let stringLink = link.map(on: .promises) { String($0) }
      #expect(allocatedBytes(stringLink) <= 88, "a two-word value is stored in place")
      resolver.fulfill(1)
      #expect(throws: Never.self) { try stringLink.wait(timeout: 10) }
    }

    @Test func anErrorFitsInTheStatesWord() {
      // The state keeps a rejection's `any Error` in the word its callbacks used.
      #expect(MemoryLayout<any Error>.size == MemoryLayout<UInt>.size)
      #expect(MemoryLayout<any Error>.alignment <= MemoryLayout<UInt>.alignment)
    }

    @Test func thePromiseStateEndsWithItsOneBytePhase() {
      // The promise's one-byte fields follow the state and fill its last word.
      #expect(MemoryLayout<PromiseState>.size == MemoryLayout<UInt>.size + 1)
    }
  }
#endif
