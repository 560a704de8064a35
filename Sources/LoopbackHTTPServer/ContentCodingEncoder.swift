/// Encodes bodies in the content codings a client is expected to decode — gzip, deflate with or
/// without its zlib wrapper, and zstd — with stored (uncompressed) blocks: valid streams, built
/// without zlib or libzstd, for tests of decoding rather than of compression.
public enum ContentCodingEncoder {
  /// `bytes` as a gzip stream (RFC 1952).
  public static func gzip(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF]  // magic, deflate, no flags, OS unknown
    out += rawDeflate(bytes)
    out += littleEndian(CRC32.checksum(bytes))
    out += littleEndian(UInt32(truncatingIfNeeded: bytes.count))
    return out
  }

  /// `bytes` as a zlib stream (RFC 1950): what `Content-Encoding: deflate` means.
  public static func zlib(_ bytes: [UInt8]) -> [UInt8] {
    // CMF 0x78 (deflate, 32 KiB window), FLG 0x01 (no dictionary; 0x7801 is a multiple of 31).
    [0x78, 0x01] + rawDeflate(bytes) + bigEndian(adler32(bytes))
  }

  /// `bytes` as one Zstandard frame (RFC 8878) of raw blocks, declaring a window of
  /// 2^`windowLog` bytes (10...41; a decoder may refuse a window it finds too large).
  public static func zstd(_ bytes: [UInt8], windowLog: Int = 20) -> [UInt8] {
    precondition((10...41).contains(windowLog))
    // Magic number; Frame_Header_Descriptor 0 (no content size, not a single segment, no
    // checksum, no dictionary); Window_Descriptor: exponent windowLog - 10, mantissa 0.
    var out: [UInt8] = [0x28, 0xB5, 0x2F, 0xFD, 0x00, UInt8((windowLog - 10) << 3)]
    // A block holds at most min(window, 128 KiB) bytes.
    let blockLimit = min(1 << windowLog, 128 * 1024)
    var offset = 0
    repeat {
      let count = min(blockLimit, bytes.count - offset)
      let last = offset + count == bytes.count
      // Block_Header, 3 bytes little-endian: Last_Block, Block_Type 0 (raw), Block_Size.
      let header = (last ? 1 : 0) | (count << 3)
      out += [UInt8(header & 0xFF), UInt8((header >> 8) & 0xFF), UInt8((header >> 16) & 0xFF)]
      out += bytes[offset..<offset + count]
      offset += count
    } while offset < bytes.count
    return out
  }

  /// `bytes` as raw DEFLATE (RFC 1951), as some servers send `deflate` without the wrapper.
  public static func rawDeflate(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    var offset = 0
    repeat {
      let count = min(65_535, bytes.count - offset)
      let final = offset + count == bytes.count
      // BFINAL, BTYPE 00 (stored), padded to the byte; then LEN and its complement.
      out.append(final ? 1 : 0)
      out += [UInt8(count & 0xFF), UInt8(count >> 8), UInt8(~count & 0xFF), UInt8((~count >> 8) & 0xFF)]
      out += bytes[offset..<offset + count]
      offset += count
    } while offset < bytes.count
    return out
  }

  private static func adler32(_ bytes: [UInt8]) -> UInt32 {
    var a: UInt32 = 1
    var b: UInt32 = 0
    for byte in bytes {
      a = (a + UInt32(byte)) % 65_521
      b = (b + a) % 65_521
    }
    return b << 16 | a
  }

  private static func littleEndian(_ value: UInt32) -> [UInt8] {
    stride(from: 0, to: 32, by: 8).map { UInt8(truncatingIfNeeded: value >> $0) }
  }

  private static func bigEndian(_ value: UInt32) -> [UInt8] {
    littleEndian(value).reversed()
  }
}
