/// The place in source code where a promise was created, carried by diagnostics.
public struct CreationSite: Sendable, Hashable, CustomStringConvertible {
  /// The file, as `#fileID` spells it (`Module/File.swift`).
  public let fileID: String
  /// The line in that file.
  public let line: Int

  /// Creates a site from a file identifier and a line.
  public init(fileID: String, line: Int) {
    self.fileID = fileID
    self.line = line
  }

  init(_ fileID: StaticString, _ line: UInt32) {
    self.fileID = fileID.description
    self.line = Int(line)
  }

  init(_ fileStart: UnsafeRawPointer, _ line: UInt32) {
    self.fileID = String(cString: fileStart.assumingMemoryBound(to: CChar.self))
    self.line = Int(line)
  }

  /// `File.swift:12` style text.
  public var description: String { "\(fileID):\(line)" }
}
