import Foundation

/// A `multipart/form-data` form (RFC 7578): text fields and files, sent with
/// `HTTPBody.multipart(_:)`.
///
/// ```swift
/// var form = MultipartForm()
/// form.append("Ada", name: "author")
/// form.append(fileAt: reportURL, name: "report", contentType: "application/pdf")
/// ```
///
/// Names and file names are written as browsers write them: UTF-8, with `"`, CR and LF
/// percent-encoded (`%22`, `%0D`, `%0A`). Files are read from disk in chunks while the body is
/// sent, never loaded whole.
///
/// The boundary is `PromiseHTTP-` and 32 random hexadecimal digits (128 bits). It is checked
/// against every part held in memory, and a new one drawn if one holds it; file contents are
/// checked as they are read, and a file that holds the boundary fails the upload with
/// `HTTPError.invalidRequest`. For a file of n bytes not made to hold it, the chance is about
/// n / 2^128: for a terabyte, 1 in 10^26.
public struct MultipartForm: Sendable {
  /// The content of a part.
  enum Content: Sendable {
    case data(Data)
    case file(URL)
  }

  /// One part of the form.
  struct Part: Sendable {
    var name: String
    var fileName: String?
    var contentType: String?
    var content: Content
  }

  /// The boundary between the parts, in the body and in `contentType`.
  public private(set) var boundary: String
  /// Whether the boundary was drawn here, and can be drawn again.
  private let drawsBoundary: Bool
  private(set) var parts: [Part] = []

  /// Creates an empty form with `boundary`, or a random one (`PromiseHTTP-` and 32
  /// hexadecimal digits) when `nil`.
  ///
  /// A boundary of your own must be 1 to 70 characters of RFC 2046's set (letters, digits and
  /// `'()+_,-./:=?` and space, not last), and must not occur in the parts: an upload of a form
  /// that breaks either rule is rejected with `HTTPError.invalidRequest`.
  public init(boundary: String? = nil) {
    self.boundary = boundary ?? Self.randomBoundary()
    self.drawsBoundary = boundary == nil
  }

  /// `multipart/form-data; boundary=…`: the `Content-Type` of the body.
  public var contentType: String {
    "multipart/form-data; boundary=\(boundary)"
  }

  /// Appends a text field: `value` as UTF-8, with no `Content-Type` (text/plain by default).
  public mutating func append(_ value: String, name: String) {
    add(Part(name: name, fileName: nil, contentType: nil, content: .data(Data(value.utf8))))
  }

  /// Appends `data` as a part; with a `fileName`, as a file (`application/octet-stream` unless
  /// `contentType` says otherwise).
  ///
  /// - Parameters:
  ///   - data: The content of the part.
  ///   - name: The name of the form field.
  ///   - fileName: The file name the server sees, or `nil` for a plain field.
  ///   - contentType: The part's `Content-Type`.
  public mutating func append(_ data: Data, name: String, fileName: String? = nil, contentType: String? = nil)
  {
    let type = contentType ?? (fileName == nil ? nil : Self.defaultFileType)
    add(Part(name: name, fileName: fileName, contentType: type, content: .data(data)))
  }

  /// Appends the file at `url` as a part, read from disk when the body is sent.
  ///
  /// A file that cannot be read then rejects the upload with `HTTPError.invalidRequest` naming
  /// it, before anything is sent.
  ///
  /// - Parameters:
  ///   - url: A file URL.
  ///   - name: The name of the form field.
  ///   - fileName: The file name the server sees; the last component of `url` by default.
  ///   - contentType: The part's `Content-Type`; `application/octet-stream` by default.
  public mutating func append(
    fileAt url: URL, name: String, fileName: String? = nil, contentType: String? = nil
  ) {
    add(
      Part(
        name: name, fileName: fileName ?? url.lastPathComponent,
        contentType: contentType ?? Self.defaultFileType, content: .file(url)))
  }

  /// Writes the encoded form to a file at `url` (replacing it), reading files in chunks.
  ///
  /// For a server that needs a `Content-Length` with a form of files: upload the file written
  /// here with `HTTPBody.file(_:)`.
  ///
  /// - Throws: `HTTPError.invalidRequest` for a form that cannot be sent (a file that cannot be
  ///   read or holds the boundary), or the error of writing the file.
  public func write(to url: URL) throws {
    let plan = try plan().get()
    guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
      throw HTTPError.invalidRequest("could not create the file '\(url.path)' for the form")
    }
    let output = try FileHandle(forWritingTo: url)
    defer { try? output.close() }
    let stream = MultipartBodyStream(plan.segments, boundary: boundary)
    defer { stream.abort() }
    let size = 64 * 1024
    let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
    defer { buffer.deallocate() }
    while true {
      let count = stream.read(buffer, maxLength: size)
      if count == 0 { break }
      guard count > 0 else {
        throw stream.failure ?? HTTPError.invalidRequest("could not read the form's parts")
      }
      try output.write(contentsOf: Data(bytes: buffer, count: count))
    }
  }

  // MARK: Encoding

  static let defaultFileType = "application/octet-stream"

  /// `PromiseHTTP-` and 32 random hexadecimal digits (128 bits).
  static func randomBoundary() -> String {
    var generator = SystemRandomNumberGenerator()
    let bits = (generator.next() as UInt64, generator.next() as UInt64)
    let hex = [bits.0, bits.1].map { value in
      let digits = String(value, radix: 16)
      return String(repeating: "0", count: 16 - digits.count) + digits
    }
    return "PromiseHTTP-" + hex.joined()
  }

  private mutating func add(_ part: Part) {
    parts.append(part)
    // A boundary drawn here never occurs in a part held in memory: draw again until it does not.
    guard drawsBoundary else { return }
    while parts.contains(where: { Self.holds(Data(("--" + boundary).utf8), part: $0, boundary: boundary) }) {
      boundary = Self.randomBoundary()
    }
  }

  /// Whether `part`'s header fields or in-memory content contain `needle`.
  private static func holds(_ needle: Data, part: Part, boundary: String) -> Bool {
    if UploadFile.contains(needle, in: header(of: part, boundary: boundary).dropFirst(needle.count)) {
      return true
    }
    if case .data(let data) = part.content { return UploadFile.contains(needle, in: data) }
    return false
  }

  /// `name` as browsers write a name or file name: `"`, CR and LF percent-encoded, the rest as is.
  static func escape(_ name: String) -> String {
    var escaped = ""
    for character in name.unicodeScalars {
      switch character {
      case "\"": escaped += "%22"
      case "\r": escaped += "%0D"
      case "\n": escaped += "%0A"
      default: escaped.unicodeScalars.append(character)
      }
    }
    return escaped
  }

  /// The delimiter line and header fields of `part`, through the empty line before its content.
  static func header(of part: Part, boundary: String) -> Data {
    var text = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(escape(part.name))\""
    if let fileName = part.fileName { text += "; filename=\"\(escape(fileName))\"" }
    text += "\r\n"
    if let type = part.contentType { text += "Content-Type: \(type)\r\n" }
    text += "\r\n"
    return Data(text.utf8)
  }

  /// The body as segments (bytes, and files to read), with its length; or why it cannot be sent.
  func plan() -> Result<MultipartPlan, HTTPError> {
    if let problem = Self.boundaryProblem(boundary) { return .failure(.invalidRequest(problem)) }
    let needle = Data(("--" + boundary).utf8)
    var segments: [MultipartPlan.Segment] = []
    var pending = Data()
    for part in parts {
      if let type = part.contentType,
        type.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
      {
        return .failure(
          .invalidRequest(
            "the Content-Type of the form part '\(Self.escape(part.name))' has a control character"))
      }
      if Self.holds(needle, part: part, boundary: boundary) {
        return .failure(
          .invalidRequest(
            "the form part '\(Self.escape(part.name))' contains the boundary '\(boundary)'; choose another"))
      }
      pending.append(Self.header(of: part, boundary: boundary))
      switch part.content {
      case .data(let data):
        pending.append(data)
      case .file(let url):
        switch UploadFile.size(of: url) {
        case .failure(let error): return .failure(error)
        case .success(let size):
          if !pending.isEmpty { segments.append(.bytes(pending)) }
          pending = Data()
          segments.append(.file(url, size: size))
        }
      }
      pending.append(Data("\r\n".utf8))
    }
    pending.append(Data("--\(boundary)--\r\n".utf8))
    segments.append(.bytes(pending))
    return .success(MultipartPlan(segments: segments))
  }

  /// What is wrong with `boundary` by RFC 2046 §5.1.1, or `nil`.
  static func boundaryProblem(_ boundary: String) -> String? {
    let allowed = Set(
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? ".unicodeScalars)
    guard (1...70).contains(boundary.unicodeScalars.count),
      boundary.unicodeScalars.allSatisfy(allowed.contains), boundary.last != " "
    else {
      return
        "the multipart boundary '\(HTTPRequest.printable(boundary))' is not 1 to 70 characters of RFC 2046's set"
    }
    return nil
  }
}

/// A form laid out for sending: bytes, and files read when their turn comes.
struct MultipartPlan: Sendable {
  enum Segment: Sendable {
    case bytes(Data)
    case file(URL, size: Int64)
  }

  let segments: [Segment]

  /// The number of bytes of the body.
  var length: Int64 {
    segments.reduce(0) { total, segment in
      switch segment {
      case .bytes(let data): total + Int64(data.count)
      case .file(_, let size): total + size
      }
    }
  }

  /// The whole body, when it holds no file.
  var data: Data? {
    guard segments.count == 1, case .bytes(let data) = segments[0] else { return nil }
    return data
  }
}
