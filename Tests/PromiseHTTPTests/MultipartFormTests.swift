import Foundation
import LoopbackHTTPServer
import Testing

@testable import PromiseHTTP

/// `MultipartForm`: the exact bytes of a form, its escaping and boundary, and a second parser
/// (Python's `email` package) reading what it writes.
@Suite("MultipartForm", .timeLimit(.minutes(1)))
struct MultipartFormTests {
  /// The encoded body of `form`, written through `MultipartForm.write(to:)`.
  static func encoded(_ form: MultipartForm, in scratch: UploadTests.Scratch) throws -> Data {
    let url = scratch.directory.appendingPathComponent("form-\(UUID().uuidString)")
    try form.write(to: url)
    return try Data(contentsOf: url)
  }

  @Test func aSmallFormHasTheseExactBytes() throws {
    let scratch = try UploadTests.Scratch()
    defer { scratch.remove() }
    var form = MultipartForm(boundary: "XyZ")
    form.append("Ada", name: "author")
    form.append(Data("{}".utf8), name: "meta", fileName: "meta.json", contentType: "application/json")
    form.append(fileAt: try scratch.file("notes.txt", Data("line\r\n".utf8)), name: "notes")
    form.append("", name: "empty")
    let golden =
      "--XyZ\r\nContent-Disposition: form-data; name=\"author\"\r\n\r\nAda\r\n"
      + "--XyZ\r\nContent-Disposition: form-data; name=\"meta\"; filename=\"meta.json\"\r\n"
      + "Content-Type: application/json\r\n\r\n{}\r\n"
      + "--XyZ\r\nContent-Disposition: form-data; name=\"notes\"; filename=\"notes.txt\"\r\n"
      + "Content-Type: application/octet-stream\r\n\r\nline\r\n\r\n"
      + "--XyZ\r\nContent-Disposition: form-data; name=\"empty\"\r\n\r\n\r\n"
      + "--XyZ--\r\n"
    let body = try Self.encoded(form, in: scratch)
    #expect(String(decoding: body, as: UTF8.self) == golden)
    #expect(HTTPBody.multipart(form).length == Int64(body.count))
    #expect(form.contentType == "multipart/form-data; boundary=XyZ")
  }

  @Test func namesAreEscapedAsBrowsersDo() {
    #expect(MultipartForm.escape("a\"b\r\nc") == "a%22b%0D%0Ac")
    #expect(MultipartForm.escape("résumé 履歴.pdf") == "résumé 履歴.pdf")
    #expect(MultipartForm.escape("100%") == "100%")
  }

  @Test func theRandomBoundaryHas128BitsAndChangesWhenAPartHoldsIt() throws {
    var form = MultipartForm()
    let first = form.boundary
    #expect(first.hasPrefix("PromiseHTTP-"))
    #expect(first.count == "PromiseHTTP-".count + 32)
    #expect(first.dropFirst(12).allSatisfy { $0.isHexDigit })
    #expect(MultipartForm().boundary != first)
    form.append(Data("text --\(first) more".utf8), name: "trap")
    #expect(form.boundary != first)
    form.append("--\(form.boundary)", name: "again")
    #expect(MultipartForm.boundaryProblem(form.boundary) == nil)
    #expect(try form.plan().get().length > 0)
  }

  @Test func aBoundaryOfYourOwnIsChecked() {
    var held = MultipartForm(boundary: "mine")
    held.append("x --mine y", name: "field")
    guard case .failure(.invalidRequest(let message)) = held.plan() else {
      Issue.record("a part holding the boundary was accepted")
      return
    }
    #expect(message.contains("contains the boundary"))
    for bad in ["", String(repeating: "a", count: 71), "new\r\nline", "trailing "] {
      guard case .failure(.invalidRequest) = MultipartForm(boundary: bad).plan() else {
        Issue.record("the boundary '\(bad)' was accepted")
        continue
      }
    }
    var typed = MultipartForm()
    typed.append(Data(), name: "f", fileName: "f", contentType: "text/plain\r\nX-Evil: 1")
    guard case .failure(.invalidRequest) = typed.plan() else {
      Issue.record("a Content-Type with CR LF was accepted")
      return
    }
  }

  /// Parses `body` (of `contentType`) with Python's `email` package; returns each part's name,
  /// file name and content, or `nil` without python3.
  static func parsedByPython(_ body: Data, contentType: String, in scratch: UploadTests.Scratch) async throws
    -> [Part]?
  {
    let python =
      ["/usr/bin/python3", "/usr/local/bin/python3"].first {
        FileManager.default.isExecutableFile(atPath: $0)
      }
      ?? ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":").map { "\($0)/python3" }
      .first { FileManager.default.isExecutableFile(atPath: $0) }
    guard let python else { return nil }
    let input = try scratch.file(
      "message-\(UUID().uuidString)", Data("Content-Type: \(contentType)\r\n\r\n".utf8) + body)
    let script = """
      import email.parser, email.policy, json, sys
      message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(open(sys.argv[1], 'rb').read())
      assert message.is_multipart(), 'not multipart'
      assert not message.defects, message.defects
      parts = []
      for part in message.iter_parts():
          assert not part.defects, part.defects
          name = part.get_param('name', header='content-disposition')
          parts.append([str(name), part.get_filename(), part.get_payload(decode=True).hex()])
      print(json.dumps(parts))
      """
    // python3 starts in 50 ms, seconds under a sanitizer: waited for off the cooperative pool.
    let outcome = try await offThePool {
      Result { try ChildProcess.run(python, ["-c", script, input.path], timeout: .seconds(60)) }
    }.get()
    guard outcome.isSuccess else {
      Issue.record("python3 could not parse the form (\(outcome.summary)):\n\(outcome.standardErrorText)")
      return []
    }
    let rows = try JSONDecoder().decode([[String?]].self, from: outcome.standardOutput)
    return rows.map { Part(name: $0[0] ?? "", fileName: $0[1], content: Data(hex: $0[2] ?? "")) }
  }

  struct Part: Equatable {
    var name: String
    var fileName: String?
    var content: Data
  }

  @Test func pythonsEmailPackageReadsWhatWeWrite() async throws {
    let scratch = try UploadTests.Scratch()
    defer { scratch.remove() }
    let binary =
      Data([0, 1, 2, 13, 10, 45, 45, 13, 10, 0xFF, 0xFE]) + Data("\r\n--\r\n--not-the-boundary\r\n".utf8)
      + UploadTests.pattern(70_000)
    var form = MultipartForm()
    form.append("plain", name: "simple")
    form.append("", name: "empty")
    form.append("quoted \"value\"\r\nwith lines", name: "say \"hi\"\r\nthere")
    form.append("ünïcödé 値", name: "名前")
    form.append(binary, name: "blob", fileName: "da\"ta\r\n.bin")
    form.append(fileAt: try scratch.file("on disk.bin", binary), name: "disk", fileName: "résumé.pdf")
    form.append(Data(), name: "nothing", fileName: "empty.txt", contentType: "text/plain")
    let body = try Self.encoded(form, in: scratch)
    guard let parts = try await Self.parsedByPython(body, contentType: form.contentType, in: scratch) else {
      // No python3 here: nothing to compare with.
      return
    }
    #expect(
      parts == [
        Part(name: "simple", fileName: nil, content: Data("plain".utf8)),
        Part(name: "empty", fileName: nil, content: Data()),
        Part(
          name: "say %22hi%22%0D%0Athere", fileName: nil,
          content: Data("quoted \"value\"\r\nwith lines".utf8)),
        Part(name: "名前", fileName: nil, content: Data("ünïcödé 値".utf8)),
        Part(name: "blob", fileName: "da%22ta%0D%0A.bin", content: binary),
        Part(name: "disk", fileName: "résumé.pdf", content: binary),
        Part(name: "nothing", fileName: "empty.txt", content: Data()),
      ])
  }
}

extension Data {
  /// The bytes of a string of hexadecimal digit pairs.
  init(hex: String) {
    var bytes: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) {
      bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
      index = next
    }
    self.init(bytes)
  }
}
