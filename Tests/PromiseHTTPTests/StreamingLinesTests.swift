import Foundation
import Testing

@testable import PromiseHTTP

/// The line splitter and the stream's buffer, as values: no socket, no thread.
@Suite("Streaming lines and buffer")
struct StreamingLinesTests {
  /// Feeds `chunks` to a splitter and returns its lines, or the error it threw.
  func lines(_ chunks: [[UInt8]], maximumLength: Int = 100) -> Result<[String], HTTPStreamError> {
    var splitter = LineSplitter(maximumLength: maximumLength)
    var lines: [String] = []
    do {
      for chunk in chunks {
        splitter.append(Data(chunk))
        while let line = try splitter.nextLine() { lines.append(line) }
      }
    } catch {
      return .failure(error as! HTTPStreamError)
    }
    if let last = splitter.finish() { lines.append(last) }
    return .success(lines)
  }

  @Test func linesEndAtLFOrCRLFAndALastLineNeedsNoNewline() {
    #expect(lines([Array("a\nb\r\n\nc".utf8)]) == .success(["a", "b", "", "c"]))
    #expect(lines([Array("a\n".utf8)]) == .success(["a"]))
    #expect(lines([]) == .success([]))
    #expect(lines([Array("\r\n".utf8)]) == .success([""]))
  }

  @Test func aLineSplitAcrossChunksIsWhole() {
    #expect(
      lines([Array("hel".utf8), Array("lo\r".utf8), Array("\nwor".utf8), Array("ld".utf8)])
        == .success(["hello", "world"]))
  }

  @Test func aCharacterSplitAcrossChunksArrivesIntact() {
    // "é" is C3 A9 and "🙂" is F0 9F 99 82 in UTF-8: each cut in the middle.
    let bytes = Array("café 🙂\n".utf8)
    let cut = bytes.firstIndex(of: 0xA9)!
    let emoji = bytes.firstIndex(of: 0x9F)!
    let chunks = [Array(bytes[..<cut]), Array(bytes[cut..<emoji]), Array(bytes[emoji...])]
    #expect(lines(chunks) == .success(["café 🙂"]))
  }

  @Test func aLineLongerThanTheLimitFailsWithoutWaitingForItsNewline() {
    // Without a newline, it fails as soon as it is too long: memory does not grow.
    #expect(
      lines([Array(repeating: 0x78, count: 11)], maximumLength: 10) == .failure(.lineTooLong(limit: 10)))
    // With its newline in the same chunk.
    #expect(lines([Array("0123456789A\nok\n".utf8)], maximumLength: 10) == .failure(.lineTooLong(limit: 10)))
    // Exactly the limit passes, with or without CR.
    #expect(
      lines([Array("0123456789\r".utf8), Array("\n0123456789".utf8)], maximumLength: 10)
        == .success(["0123456789", "0123456789"]))
  }

  @Test func theBufferKeepsAtMostItsHighWaterMarkInMemoryAndTheOrderAcrossTheSpillFile() throws {
    var buffer = ResponseStreamBuffer(highWaterMark: 10, spillLimit: 1000, readSize: 7)
    var expected = Data()
    for index in 0..<20 {
      let chunk = Data((0..<4).map { UInt8(index * 4 + $0) })
      expected.append(chunk)
      #expect(buffer.append(chunk) == nil)
      #expect(buffer.memoryBytes <= 10)
    }
    #expect(buffer.spilledBytes == 72)
    buffer.finish(.finished)
    var read = Data()
    loop: while true {
      switch buffer.next() {
      case .bytes(let data): read.append(data)
      case .end(.finished): break loop
      default: Issue.record("unexpected"); break loop
      }
    }
    #expect(read == expected)
    #expect(buffer.peakMemoryBytes == 8)
  }

  @Test func aDrainedSpillFileStartsOverAndNewBytesGoToMemory() {
    var buffer = ResponseStreamBuffer(highWaterMark: 4, spillLimit: 8)
    _ = buffer.append(Data([1, 2, 3, 4]))
    _ = buffer.append(Data([5, 6, 7, 8, 9, 10, 11, 12]))  // to the file, at its limit
    guard case .bytes(let first) = buffer.next(), case .bytes(let second) = buffer.next() else {
      Issue.record("expected bytes")
      return
    }
    #expect(first == Data([1, 2, 3, 4]) && second == Data([5, 6, 7, 8, 9, 10, 11, 12]))
    // The file is empty again: the limit counts what waits there, not what went through.
    #expect(buffer.append(Data([13])) == nil)
    #expect(buffer.memoryBytes == 1)
    _ = buffer.append(Data([14, 15, 16, 17, 18, 19, 20, 21]))
    guard case .failed(let error)? = buffer.append(Data([22])) else {
      Issue.record("expected the spill limit")
      return
    }
    #expect(error as? HTTPStreamError == .readerFellBehind(limit: 8))
  }
}
