import Foundation
import Testing

/// Checks that the Swift a reader sees in `README.md` and `Docs/*.md` is the code the
/// snippet tests in `Tests/DocTests/Snippets` compile and run.
///
/// Each ```swift block must equal (after trimming common indentation and trailing
/// whitespace) the visible lines of exactly one `// snippet.NAME` … `// snippet.end` slice,
/// and each slice must appear on some page. The number of test cases reported for the first
/// two tests is the number of blocks and slices checked.
@Suite struct DocBlocksTests {
  static let catalog = DocCatalog.shared

  @Test(
    "Every swift block on a page is the visible part of exactly one snippet of the page's own file",
    arguments: catalog.blocks)
  func blockMatchesOneSnippet(_ block: MarkdownBlock) {
    // One file per page: the file's imports are then the page's (see DocImportsTests).
    let file = DocCatalog.snippetFile(for: block.page)
    let matches = Self.catalog.slices.filter { $0.file == file && $0.visible == block.text }
    switch matches.count {
    case 1:
      return
    case 0:
      let elsewhere = Self.catalog.slices.filter { $0.visible == block.text }
      if elsewhere.isEmpty {
        Issue.record(Comment(rawValue: Self.mismatchReport(for: block)))
      } else {
        Issue.record(
          "\(block) is the snippet \(elsewhere.map(\.description)), which is not in \(file): a page's examples live in its own snippet file"
        )
      }
    default:
      Issue.record("\(block) matches \(matches.count) snippets: \(matches.map(\.description)); keep one")
    }
  }

  @Test("Every snippet slice is shown on the page its file serves", arguments: catalog.slices)
  func sliceIsShown(_ slice: SnippetSlice) {
    let uses = Self.catalog.blocks.filter {
      $0.text == slice.visible && DocCatalog.snippetFile(for: $0.page) == slice.file
    }
    #expect(!uses.isEmpty, "snippet \(slice) is not on the page of \(slice.file): show it or delete it")
  }

  @Test("Every printed claim of a snippet is asserted by its hidden code", arguments: catalog.slices)
  func printedClaimsAreAsserted(_ slice: SnippetSlice) {
    let hidden = slice.hidden.joined(separator: "\n")
    for claim in DocText.printedClaims(in: slice.visible) {
      // "…" stands for text that varies (a line number): each piece around it must be asserted.
      let pieces =
        claim.contains("…") ? claim.components(separatedBy: "…").filter { !$0.isEmpty } : ["\"\(claim)\""]
      for piece in pieces {
        #expect(
          hidden.contains(piece),
          "snippet \(slice) claims it prints \"\(claim)\" but no hidden line asserts \(piece)")
      }
    }
  }

  @Test("The pages and snippet files are well-formed")
  func catalogIsWellFormed() {
    let catalog = Self.catalog
    print(
      "DocTests: \(catalog.blocks.count) swift blocks in \(catalog.pages.count) pages checked against \(catalog.slices.count) snippet slices"
    )
    for problem in catalog.problems {
      Issue.record(Comment(rawValue: problem))
    }
    #expect(catalog.pages.contains("README.md"), "README.md is missing")
    #expect(
      catalog.blocks.count > 0,
      "checked \(catalog.blocks.count) swift blocks in \(catalog.pages.count) pages against \(catalog.slices.count) snippet slices"
    )
  }

  /// Names the nearest slice and shows how the block differs from it.
  static func mismatchReport(for block: MarkdownBlock) -> String {
    let blockLines = block.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    let nearest = catalog.slices.max { a, b in
      commonLineCount(blockLines, a.visible) < commonLineCount(blockLines, b.visible)
    }
    guard let nearest else {
      return "\(block): no snippet slice matches (there are no slices at all)"
    }
    let sliceLines = nearest.visible.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    return """
      \(block): this swift block matches no snippet slice. Nearest: \(nearest).
      Lines marked - are only in the page, + only in the snippet:
      \(diff(blockLines, sliceLines).joined(separator: "\n"))
      """
  }

  static func commonLineCount(_ lines: [String], _ text: String) -> Int {
    let other = Set(text.split(separator: "\n").map(String.init))
    return lines.filter { other.contains($0) }.count
  }

  /// A line diff from a longest common subsequence: `  ` same, `- ` left only, `+ ` right only.
  static func diff(_ left: [String], _ right: [String]) -> [String] {
    var table = Array(repeating: Array(repeating: 0, count: right.count + 1), count: left.count + 1)
    for i in stride(from: left.count - 1, through: 0, by: -1) {
      for j in stride(from: right.count - 1, through: 0, by: -1) {
        table[i][j] = left[i] == right[j] ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
      }
    }
    var output: [String] = []
    var i = 0
    var j = 0
    while i < left.count || j < right.count {
      if i < left.count, j < right.count, left[i] == right[j] {
        output.append("  " + left[i])
        i += 1
        j += 1
      } else if j < right.count, i == left.count || table[i][j + 1] >= table[i + 1][j] {
        output.append("+ " + right[j])
        j += 1
      } else {
        output.append("- " + left[i])
        i += 1
      }
    }
    return output
  }
}

extension MarkdownBlock: CustomTestStringConvertible {
  var testDescription: String { description }
}

extension SnippetSlice: CustomTestStringConvertible {
  var testDescription: String { name }
}
