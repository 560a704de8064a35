import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A cheap, order-sensitive 64-bit checksum of a byte stream, fed in pieces of any size.
///
/// It tells whether a downloaded file or a received upload is byte-identical to what was
/// meant, without keeping either in memory: compare it with ``GeneratedBody/checksum``, or
/// with the ``ConsumedBody/checksum`` the server recorded. It is not cryptographic (use it on
/// test data only), but it never misses a change confined to one aligned 8-byte word, a
/// truncation or an extension, and a shifted or misplaced range changes it with overwhelming
/// odds. Two checksums are equal when their byte counts and ``value``s are.
///
/// The algorithm, for reimplementation: the stream is cut into 32-byte blocks (the last one
/// padded with zero bytes), each read as four little-endian 64-bit words; four lanes start at
/// `0x6A09E667F3BCC908`, `0xBB67AE8584CAA73B`, `0x3C6EF372FE94F82B` and `0xA54FF53A5F1D36F1`,
/// and lane `i` takes word `i` of each block as `lane = rotl((lane ^ word) &* 0x100000001B3, 29)`.
/// The value is `f(f(f(f(lane0 ^ count) ^ lane1) ^ lane2) ^ lane3)`, where `count` is the byte
/// count and `f` is MurmurHash3's 64-bit finalizer.
///
/// ```swift
/// var checksum = ByteChecksum()
/// checksum.update(firstPart)
/// checksum.update(secondPart)
/// #expect(checksum == GeneratedBody(length: 1 << 20, seed: 7).checksum)
/// ```
public struct ByteChecksum: Sendable, Hashable, CustomStringConvertible {
  private static let prime: UInt64 = 0x0000_0100_0000_01B3

  private var lane0: UInt64 = 0x6A09_E667_F3BC_C908
  private var lane1: UInt64 = 0xBB67_AE85_84CA_A73B
  private var lane2: UInt64 = 0x3C6E_F372_FE94_F82B
  private var lane3: UInt64 = 0xA54F_F53A_5F1D_36F1
  /// Bytes of an unfinished 32-byte block, little-endian, and how many of them there are.
  private var pending: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
  private var pendingCount = 0

  /// The number of bytes fed so far.
  public private(set) var byteCount: Int64 = 0

  /// Creates the checksum of zero bytes; feed it with the `update` methods.
  public init() {}

  /// Creates the checksum of `bytes`.
  public init(_ bytes: some Sequence<UInt8>) {
    update(bytes)
  }

  /// Creates the checksum of the contents of the file at `path`, read in 1 MiB pieces.
  ///
  /// - Throws: ``LoopbackServerError`` when the file cannot be opened or read.
  public init(contentsOfFile path: String) throws(LoopbackServerError) {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw LoopbackServerError(operation: "open(\(path))", code: errno) }
    defer { _ = close(fd) }
    if let code = readPieces(of: fd, pieceSize: 1 << 20, { update($0) }) {
      throw LoopbackServerError(operation: "read(\(path))", code: code)
    }
  }

  /// Feeds `bytes`.
  public mutating func update(_ bytes: some Sequence<UInt8>) {
    let done: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
    if done != nil { return }
    var piece: [UInt8] = []
    piece.reserveCapacity(64 * 1024)
    for byte in bytes {
      piece.append(byte)
      if piece.count == 64 * 1024 {
        piece.withUnsafeBytes { update($0) }
        piece.removeAll(keepingCapacity: true)
      }
    }
    piece.withUnsafeBytes { update($0) }
  }

  /// Feeds the bytes of `data`.
  public mutating func update(_ data: Data) {
    data.withUnsafeBytes { update($0) }
  }

  /// Feeds the bytes in `buffer`.
  public mutating func update(_ buffer: UnsafeRawBufferPointer) {
    guard var base = buffer.baseAddress, !buffer.isEmpty else { return }
    var count = buffer.count
    byteCount += Int64(count)
    // Complete an unfinished block byte by byte.
    if pendingCount > 0 {
      while pendingCount < 32 && count > 0 {
        appendPending(base.load(as: UInt8.self))
        base += 1
        count -= 1
      }
      guard pendingCount == 32 else { return }
      absorb(pending.0, pending.1, pending.2, pending.3)
      pending = (0, 0, 0, 0)
      pendingCount = 0
    }
    // Whole blocks: in place when 8-byte aligned, else through an aligned copy.
    let whole = count & ~31
    if whole > 0 {
      if Int(bitPattern: base) & 7 == 0 {
        absorbBlocks(base.assumingMemoryBound(to: UInt64.self), words: whole / 8)
      } else {
        let scratchSize = 64 * 1024
        withUnsafeTemporaryAllocation(byteCount: scratchSize, alignment: 16) { scratch in
          var offset = 0
          while offset < whole {
            let n = min(scratchSize, whole - offset)
            memcpy(scratch.baseAddress!, base + offset, n)
            absorbBlocks(scratch.baseAddress!.assumingMemoryBound(to: UInt64.self), words: n / 8)
            offset += n
          }
        }
      }
    }
    // Keep the tail for the next call.
    for index in whole..<count {
      appendPending(base.load(fromByteOffset: index, as: UInt8.self))
    }
  }

  /// The checksum of everything fed so far (feeding more afterwards is fine).
  public var value: UInt64 {
    var copy = self
    if copy.pendingCount > 0 {
      copy.absorb(copy.pending.0, copy.pending.1, copy.pending.2, copy.pending.3)
    }
    var hash = Self.finalize(copy.lane0 ^ UInt64(bitPattern: byteCount))
    hash = Self.finalize(hash ^ copy.lane1)
    hash = Self.finalize(hash ^ copy.lane2)
    return Self.finalize(hash ^ copy.lane3)
  }

  /// Returns the byte count and value, for example `1048576 bytes, checksum 0x0123456789abcdef`.
  public var description: String {
    let hex = String(value, radix: 16)
    return "\(byteCount) bytes, checksum 0x\(String(repeating: "0", count: 16 - hex.count))\(hex)"
  }

  /// Returns whether both have the same byte count and value.
  public static func == (lhs: ByteChecksum, rhs: ByteChecksum) -> Bool {
    lhs.byteCount == rhs.byteCount && lhs.value == rhs.value
  }

  /// Hashes the byte count and value.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(byteCount)
    hasher.combine(value)
  }

  private mutating func appendPending(_ byte: UInt8) {
    let shift = UInt64((pendingCount & 7) * 8)
    let bits = UInt64(byte) << shift
    switch pendingCount >> 3 {
    case 0: pending.0 |= bits
    case 1: pending.1 |= bits
    case 2: pending.2 |= bits
    default: pending.3 |= bits
    }
    pendingCount += 1
  }

  private mutating func absorb(_ w0: UInt64, _ w1: UInt64, _ w2: UInt64, _ w3: UInt64) {
    lane0 = Self.rotated((lane0 ^ w0) &* Self.prime)
    lane1 = Self.rotated((lane1 ^ w1) &* Self.prime)
    lane2 = Self.rotated((lane2 ^ w2) &* Self.prime)
    lane3 = Self.rotated((lane3 ^ w3) &* Self.prime)
  }

  /// Absorbs `count` aligned words (a multiple of 4).
  ///
  /// Written as one loop with local lanes and subscripts: in a debug build that is several
  /// times faster than calling `absorb` per block.
  private mutating func absorbBlocks(_ words: UnsafePointer<UInt64>, words count: Int) {
    var a = lane0
    var b = lane1
    var c = lane2
    var d = lane3
    let prime = Self.prime
    var index = 0
    while index < count {
      a = (a ^ UInt64(littleEndian: words[index])) &* prime
      b = (b ^ UInt64(littleEndian: words[index + 1])) &* prime
      c = (c ^ UInt64(littleEndian: words[index + 2])) &* prime
      d = (d ^ UInt64(littleEndian: words[index + 3])) &* prime
      a = a << 29 | a >> 35
      b = b << 29 | b >> 35
      c = c << 29 | c >> 35
      d = d << 29 | d >> 35
      index += 4
    }
    lane0 = a
    lane1 = b
    lane2 = c
    lane3 = d
  }

  private static func rotated(_ x: UInt64) -> UInt64 {
    x << 29 | x >> 35
  }

  /// MurmurHash3's 64-bit finalizer (a bijection).
  static func finalize(_ x: UInt64) -> UInt64 {
    var z = x
    z = (z ^ (z >> 33)) &* 0xFF51_AFD7_ED55_8CCD
    z = (z ^ (z >> 33)) &* 0xC4CE_B9FE_1A85_EC53
    return z ^ (z >> 33)
  }
}
