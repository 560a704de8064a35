import Foundation
import Testing

/// Checks that each page shows every import its examples need, so that a reader who copies a
/// page's code and its imports into a file of their own has a file that compiles.
///
/// The examples of `Docs/<Name>.md` (and `README.md`) are the slices of one file,
/// `Tests/DocTests/Snippets/<Name>.swift` (`DocBlocksTests` checks that), and that file imports
/// exactly the modules the page's swift blocks import, plus `Testing` for its `@Test`s. Swift's
/// imports are per file: a top-level name (`DispatchQueue`, `URL`) resolves only through an
/// import of the file that names it, so the snippet file compiling proves the page's code
/// compiles with the imports the page shows. The DocTests target turns on the upcoming feature
/// `MemberImportVisibility`, so members (`.utf8` on `String` from Foundation, `.decode` from
/// PromiseHTTP) resolve only through the file's own imports too.
///
/// Hidden setup that needs another module (the loopback server, `NSLock`) lives in
/// `Tests/DocTests/Support`, files of their own, whose imports a page need not show.
@Suite struct DocImportsTests {
  static let catalog = DocCatalog.shared
  /// The modules a snippet file may import beyond the page's: the test framework.
  static let testOnlyModules: Set<String> = ["Testing"]

  /// The pages with at least one swift block.
  static var pagesWithExamples: [String] {
    catalog.pages.filter { page in catalog.blocks.contains { $0.page == page } }
  }

  @Test("Each page shows exactly the imports of its snippet file", arguments: pagesWithExamples)
  func pageShowsItsImports(_ page: String) {
    let file = DocCatalog.snippetFile(for: page)
    guard let fileImports = Self.catalog.snippetImports[file] else {
      Issue.record("\(page) has swift blocks but there is no \(file) to test them")
      return
    }
    let shown = Self.catalog.shownImports(of: page)
    let needed = fileImports.filter { !Self.testOnlyModules.contains($0) }
    let unshown = needed.filter { !shown.contains($0) }
    let unused = shown.filter { !needed.contains($0) }
    #expect(
      unshown.isEmpty,
      "\(file) imports \(unshown) but \(page) does not show it: show `import \(unshown.first ?? "")` in a swift block of the page (a slice of \(file)), or move the code that needs it to Tests/DocTests/Support"
    )
    #expect(
      unused.isEmpty,
      "\(page) shows `import` of \(unused) but \(file) does not import it: the page's imports must be the file's"
    )
    #expect(
      !shown.contains { Self.testOnlyModules.contains($0) }, "\(page) shows an import of a test-only module")
  }

  @Test("Every snippet file serves a page")
  func everySnippetFileServesAPage() {
    let served = Set(Self.catalog.pages.map(DocCatalog.snippetFile(for:)))
    for file in Self.catalog.snippetImports.keys.sorted() where !served.contains(file) {
      Issue.record("\(file) is named after no page (README.md or Docs/<Name>.md)")
    }
  }

  @Test("An import is read as the module it imports")
  func importLinesAreParsed() {
    #expect(DocText.importedModule(on: "import Dispatch  // DispatchQueue") == "Dispatch")
    #expect(DocText.importedModule(on: "  import FoundationNetworking") == "FoundationNetworking")
    #expect(DocText.importedModule(on: "@preconcurrency import struct Foundation.URL") == "Foundation")
    #expect(DocText.importedModule(on: "public import Promises") == "Promises")
    #expect(DocText.importedModule(on: "// import Foundation") == nil)
    #expect(DocText.importedModule(on: "let important = 1") == nil)
  }
}
