/// Encodes bodies in the content codings a client is expected to decode — gzip, and deflate with
/// or without its zlib wrapper — with stored (uncompressed) DEFLATE blocks: valid streams,
/// built without zlib, for tests of decoding rather than of compression.
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
