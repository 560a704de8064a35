import Foundation

/// A ```swift block of a Markdown page, normalized for comparison.
struct MarkdownBlock: Sendable, CustomStringConvertible {
  /// The page, relative to the package root (`Docs/Chaining.md`).
  let page: String
  /// The line of the opening fence, 1-based.
  let line: Int
  /// The block's lines, normalized with `DocText.normalize`.
  let text: String

  var description: String { "\(page):\(line)" }
}

/// One `// snippet.NAME` … `// snippet.end` slice of a Swift file in `Tests/DocTests/Snippets`.
struct SnippetSlice: Sendable, CustomStringConvertible {
  let name: String
  /// The Swift file, relative to the package root.
  let file: String
  /// The line of the `// snippet.NAME` marker, 1-based.
  let line: Int
  /// The lines a reader sees (outside `snippet.hide` … `snippet.show`), normalized.
  let visible: String
  /// Every other line from the marker up to the next slice: hidden setup and assertions.
  var hidden: [String]

  var description: String { "\(name) (\(file):\(line))" }
}

/// Text normalization shared by blocks and slices.
enum DocText {
  /// Trims trailing whitespace, drops leading and trailing blank lines and the indentation
  /// common to all non-blank lines.
  static func normalize(_ lines: [Substring]) -> String {
    var lines = lines.map { line -> Substring in
      var line = line
      while let last = line.last, last == " " || last == "\t" || last == "\r" { line.removeLast() }
      return line
    }
    while let first = lines.first, first.isEmpty { lines.removeFirst() }
    while let last = lines.last, last.isEmpty { lines.removeLast() }
    let indent =
      lines.filter { !$0.isEmpty }.map { $0.prefix(while: { $0 == " " }).count }.min() ?? 0
    return lines.map { $0.isEmpty ? "" : String($0.dropFirst(indent)) }.joined(separator: "\n")
  }

  /// The module an `import` declaration on `line` imports (`Foundation` for
  /// `@preconcurrency import struct Foundation.URL`), or `nil` when the line is no import.
  static func importedModule(on line: Substring) -> String? {
    var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
    while let first = words.first, first.hasPrefix("@") || accessModifiers.contains(String(first)) {
      words.removeFirst()
    }
    guard words.first == "import", words.count >= 2 else { return nil }
    words.removeFirst()
    if let kind = words.first, importKinds.contains(String(kind)), words.count >= 2 { words.removeFirst() }
    return words.first.map { String($0.prefix(while: { $0 != "." })) }
  }

  static let accessModifiers: Set<String> = ["public", "package", "internal", "fileprivate", "private"]
  static let importKinds: Set<String> = [
    "struct", "class", "enum", "protocol", "typealias", "func", "let", "var",
  ]

  /// The quoted strings of the `// prints "…"` comments in `text`, in order.
  static func printedClaims(in text: String) -> [String] {
    var claims: [String] = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
      guard let range = line.range(of: "// prints ") else { continue }
      var rest = line[range.upperBound...]
      while let open = rest.firstIndex(of: "\"") {
        let afterOpen = rest.index(after: open)
        guard let close = rest[afterOpen...].firstIndex(of: "\"") else { break }
        claims.append(String(rest[afterOpen..<close]))
        rest = rest[rest.index(after: close)...]
      }
    }
    return claims
  }
}

/// Every page, block and snippet slice of the package, read once from the package's files.
struct DocCatalog: Sendable {
  var blocks: [MarkdownBlock] = []
  var slices: [SnippetSlice] = []
  var pages: [String] = []
  /// The Swift files of `Tests/DocTests/Snippets`, relative to the package root, with the
  /// modules each one imports (in order, without repeats).
  var snippetImports: [String: [String]] = [:]
  /// Malformed markers, duplicate slice names, missing files: each one fails a test.
  var problems: [String] = []

  static let shared = DocCatalog(root: packageRoot)

  /// The directory holding `Package.swift`, found upwards from this source file.
  static var packageRoot: URL {
    var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while url.path != "/" {
      if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
        return url
      }
      url.deleteLastPathComponent()
    }
    preconditionFailure("DocTests: no Package.swift above \(#filePath)")
  }

  init(root: URL) {
    let files = FileManager.default
    var pages = ["README.md"]
    let docs = (try? files.contentsOfDirectory(atPath: root.appendingPathComponent("Docs").path)) ?? []
    pages += docs.filter { $0.hasSuffix(".md") }.sorted().map { "Docs/\($0)" }
    for page in pages {
      guard let text = try? String(contentsOf: root.appendingPathComponent(page), encoding: .utf8)
      else {
        problems.append("\(page): cannot be read")
        continue
      }
      self.pages.append(page)
      readBlocks(of: text, page: page)
    }
    let snippetDirectory = "Tests/DocTests/Snippets"
    let swiftFiles =
      (try? files.contentsOfDirectory(atPath: root.appendingPathComponent(snippetDirectory).path)) ?? []
    for file in swiftFiles.filter({ $0.hasSuffix(".swift") }).sorted() {
      let path = "\(snippetDirectory)/\(file)"
      guard let text = try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
      else {
        problems.append("\(path): cannot be read")
        continue
      }
      readSlices(of: text, file: path)
      var modules: [String] = []
      for line in text.split(separator: "\n") {
        if let module = DocText.importedModule(on: line), !modules.contains(module) { modules.append(module) }
      }
      snippetImports[path] = modules
    }
    var seen: [String: SnippetSlice] = [:]
    for slice in slices {
      if let earlier = seen[slice.name] {
        problems.append("snippet name '\(slice.name)' is used twice: \(earlier) and \(slice)")
      }
      seen[slice.name] = slice
    }
  }

  /// The snippet file that holds the examples of `page`: `Tests/DocTests/Snippets/<name>.swift`
  /// for `README.md` and `Docs/<name>.md`.
  static func snippetFile(for page: String) -> String {
    let name = page.split(separator: "/").last.map { String($0.dropLast(".md".count)) } ?? page
    return "Tests/DocTests/Snippets/\(name).swift"
  }

  /// The modules the swift blocks of `page` import, in order, without repeats.
  func shownImports(of page: String) -> [String] {
    var modules: [String] = []
    for block in blocks where block.page == page {
      for line in block.text.split(separator: "\n") {
        if let module = DocText.importedModule(on: line), !modules.contains(module) { modules.append(module) }
      }
    }
    return modules
  }

  /// Collects the ```swift fenced blocks of a page; other languages are not checked.
  private mutating func readBlocks(of text: String, page: String) {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    var index = 0
    while index < lines.count {
      let fence = lines[index].drop(while: { $0 == " " })
      guard fence.hasPrefix("```") else {
        index += 1
        continue
      }
      let start = index
      let language = fence.dropFirst(3).trimmingCharacters(in: .whitespaces)
      index += 1
      var body: [Substring] = []
      while index < lines.count, !lines[index].drop(while: { $0 == " " }).hasPrefix("```") {
        body.append(lines[index])
        index += 1
      }
      if index == lines.count {
        problems.append("\(page):\(start + 1): a code fence is never closed")
      }
      index += 1
      if language == "swift" {
        blocks.append(MarkdownBlock(page: page, line: start + 1, text: DocText.normalize(body)))
      }
    }
  }

  /// Collects the snippet slices of one Swift file.
  private mutating func readSlices(of text: String, file: String) {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    var current: (name: String, line: Int, visible: [Substring], hidden: [String], isHidden: Bool)?
    // Lines after a slice's end (its trailing assertions) count as hidden lines of that slice.
    var trailing: Int?
    for (offset, line) in lines.enumerated() {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      guard trimmed.hasPrefix("// snippet.") else {
        if current != nil {
          if current!.isHidden {
            current!.hidden.append(String(line))
          } else {
            current!.visible.append(line)
          }
        } else if let last = trailing {
          slices[last].hidden.append(String(line))
        }
        continue
      }
      let marker = String(trimmed.dropFirst("// snippet.".count))
      let location = "\(file):\(offset + 1)"
      switch marker {
      case "hide", "show":
        guard current != nil else {
          problems.append("\(location): snippet.\(marker) outside a slice")
          continue
        }
        if current!.isHidden == (marker == "hide") {
          problems.append("\(location): snippet.\(marker) twice in a row")
        }
        current!.isHidden = marker == "hide"
      case "end":
        guard let open = current else {
          problems.append("\(location): snippet.end without a slice")
          continue
        }
        slices.append(
          SnippetSlice(
            name: open.name, file: file, line: open.line, visible: DocText.normalize(open.visible),
            hidden: open.hidden))
        trailing = slices.count - 1
        current = nil
      default:
        guard !marker.isEmpty, marker.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        else {
          problems.append("\(location): '\(trimmed)' is not a snippet marker")
          continue
        }
        if let open = current {
          problems.append("\(location): slice '\(marker)' starts inside slice '\(open.name)'")
        }
        current = (marker, offset + 1, [], [], false)
        trailing = nil
      }
    }
    if let open = current {
      problems.append("\(file):\(open.line): slice '\(open.name)' has no snippet.end")
    }
  }
}
