import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A deterministic body of any length, produced on the fly and never held whole in memory.
///
/// The bytes depend only on `seed` and the offset, so any slice can be produced directly (for a
/// `Range` request) and a test can compute what a download must contain without a file:
/// ``bytes(in:)`` for small slices, ``checksum`` for the whole body. Serve it with
/// ``ServerAction/stream(_:)``.
///
/// The pattern: a 68 KiB table of pseudo-random bytes is derived from the seed; the body is cut
/// into 4 KiB blocks, and block `k` is the table's 4 KiB window at an offset that is a hash of
/// `seed` and `k`. So it never repeats with a short period (a misplaced or shifted range
/// changes the content), yet producing it is a `memcpy` per block: more than 1 GB/s even in a
/// debug build.
///
/// ```swift
/// let body = GeneratedBody(length: 1 << 30, seed: 42)
/// router.on("GET", "/big") { _ in .stream(StreamedResponse(body: body)) }
/// // … download it to `path`, then:
/// #expect(try ByteChecksum(contentsOfFile: path) == body.checksum)
/// ```
public struct GeneratedBody: Sendable, Hashable, CustomStringConvertible {
  /// The size of the blocks that each copy one window of the table.
  static let blockSize = 4096
  /// The number of distinct window offsets in the table.
  static let windowOffsets = 64 * 1024

  /// The number of bytes in the body.
  public let length: Int64
  /// The seed the bytes derive from; two bodies with different seeds differ everywhere.
  public let seed: UInt64
  /// The seed's table: `windowOffsets + blockSize` bytes.
  private let table: [UInt8]

  /// Creates a body of `length` bytes (negative counts as zero) derived from `seed`.
  public init(length: Int64, seed: UInt64 = 1) {
    self.length = max(0, length)
    self.seed = seed
    let words = (Self.windowOffsets + Self.blockSize) / 8
    var table = [UInt8](repeating: 0, count: words * 8)
    table.withUnsafeMutableBytes { raw in
      let pointer = raw.baseAddress!.assumingMemoryBound(to: UInt64.self)
      var index = 0
      while index < words {
        pointer[index] = UInt64(littleEndian: Self.mix((seed ^ 0x5DEE_CE66_D1CE_5EED) &+ UInt64(index)))
        index += 1
      }
    }
    self.table = table
  }

  /// Returns the byte at `offset`, which must be in `0..<length`.
  public func byte(at offset: Int64) -> UInt8 {
    precondition(offset >= 0 && offset < length, "offset \(offset) is outside 0..<\(length)")
    let block = offset / Int64(Self.blockSize)
    let within = Int(offset % Int64(Self.blockSize))
    return table[windowStart(ofBlock: block) + within]
  }

  /// Returns the bytes in `range`, clamped to the body (for small slices: they are returned
  /// as an array).
  public func bytes(in range: Range<Int64>) -> [UInt8] {
    let lower = min(max(0, range.lowerBound), length)
    let upper = min(max(lower, range.upperBound), length)
    var result = [UInt8](repeating: 0, count: Int(upper - lower))
    result.withUnsafeMutableBytes { _ = copyBytes(from: lower, into: $0) }
    return result
  }

  /// Returns all the bytes of the body (for small bodies).
  public var allBytes: [UInt8] {
    bytes(in: 0..<length)
  }

  /// Fills `buffer` with the bytes starting at `offset`, as many as fit before the body ends;
  /// returns how many it wrote.
  @discardableResult
  public func copyBytes(from offset: Int64, into buffer: UnsafeMutableRawBufferPointer) -> Int {
    guard offset >= 0, offset < length, let destination = buffer.baseAddress else { return 0 }
    let count = Int(min(Int64(buffer.count), length - offset))
    table.withUnsafeBytes { table in
      let source = table.baseAddress!
      var written = 0
      var block = offset / Int64(Self.blockSize)
      var within = Int(offset % Int64(Self.blockSize))
      while written < count {
        let n = min(Self.blockSize - within, count - written)
        memcpy(destination + written, source + windowStart(ofBlock: block) + within, n)
        written += n
        block += 1
        within = 0
      }
    }
    return count
  }

  /// Returns the checksum of the whole body, computed without holding it (about 1 s per GiB
  /// in a debug build).
  public var checksum: ByteChecksum {
    checksum(of: 0..<length)
  }

  /// Returns the checksum of the bytes in `range`, clamped to the body.
  public func checksum(of range: Range<Int64>) -> ByteChecksum {
    var checksum = ByteChecksum()
    let lower = min(max(0, range.lowerBound), length)
    let upper = min(max(lower, range.upperBound), length)
    let size = 256 * 1024
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
    defer { buffer.deallocate() }
    var offset = lower
    while offset < upper {
      let n = Int(min(Int64(size), upper - offset))
      copyBytes(from: offset, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]))
      checksum.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
      offset += Int64(n)
    }
    return checksum
  }

  /// Writes the body to a new file at `path` (replacing any file there), 1 MiB at a time.
  ///
  /// For tests of uploads from a file: the file's content is known without keeping it.
  /// - Throws: ``LoopbackServerError`` when the file cannot be created or written.
  public func write(toFile path: String) throws(LoopbackServerError) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw LoopbackServerError(operation: "open(\(path))", code: errno) }
    defer { _ = close(fd) }
    let size = 1 << 20
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
    defer { buffer.deallocate() }
    var offset: Int64 = 0
    while offset < length {
      let n = copyBytes(from: offset, into: buffer)
      guard FileOutput.writeAll(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<n])) else {
        throw LoopbackServerError(operation: "write(\(path))", code: errno)
      }
      offset += Int64(n)
    }
  }

  /// Returns the body as a sequence of arrays of at most `size` bytes, produced one at a time
  /// (for tests that upload from a stream).
  public func chunks(ofSize size: Int = 256 * 1024) -> Chunks {
    Chunks(body: self, size: max(1, size))
  }

  /// The body in arrays of at most `size` bytes, each produced when asked for.
  public struct Chunks: Sequence, Sendable {
    let body: GeneratedBody
    let size: Int

    /// Returns an iterator over the chunks, from the first byte.
    public func makeIterator() -> Iterator {
      Iterator(body: body, size: size)
    }

    /// Produces the chunks one by one.
    public struct Iterator: IteratorProtocol, Sendable {
      let body: GeneratedBody
      let size: Int
      var offset: Int64 = 0

      /// Returns the next chunk, or `nil` after the last byte.
      public mutating func next() -> [UInt8]? {
        guard offset < body.length else { return nil }
        let end = Swift.min(body.length, offset + Int64(size))
        defer { offset = end }
        return body.bytes(in: offset..<end)
      }
    }
  }

  /// Returns a short summary, for example `GeneratedBody(length: 1048576, seed: 7)`.
  public var description: String {
    "GeneratedBody(length: \(length), seed: \(seed))"
  }

  /// Returns whether both have the same length and seed (and so the same bytes).
  public static func == (lhs: GeneratedBody, rhs: GeneratedBody) -> Bool {
    lhs.length == rhs.length && lhs.seed == rhs.seed
  }

  /// Hashes the length and seed.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(length)
    hasher.combine(seed)
  }

  /// The offset in the table of block `block`'s window.
  private func windowStart(ofBlock block: Int64) -> Int {
    Int(truncatingIfNeeded: Self.mix(seed &+ UInt64(bitPattern: block) &* 0x9E37_79B9_7F4A_7C15))
      & (Self.windowOffsets - 1)
  }

  /// SplitMix64's output function.
  static func mix(_ x: UInt64) -> UInt64 {
    var z = x &+ 0x9E37_79B9_7F4A_7C15
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// Writing to files with plain descriptors.
enum FileOutput {
  /// Writes all of `buffer`; returns `false` on an error (`errno` tells which).
  static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
    Socket.repeatingPartialWrites(buffer) { write(fd, $0, $1) }
  }
}
