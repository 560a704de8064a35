import Foundation

#if canImport(Glibc)
  import Glibc

  /// The system's zlib, loaded at run time: the four functions a `ContentDecoder` inflates with.
  ///
  /// Why at run time: as with `OpenSSL`, the package then needs no zlib headers or development
  /// package to build; FoundationNetworking already has `libz.so.1` in the process (libcurl
  /// decodes with it), so loading it costs nothing. Where it cannot be loaded, the socket
  /// transport asks for no encoding (`identity`) and decodes none.
  final class Zlib: Sendable {
    // Safety of `Sendable`: every stored property is a constant (`let`) function pointer looked
    // up once in `init`; zlib's functions are reentrant on distinct streams.

    let zlibVersion: @convention(c) () -> UnsafePointer<CChar>?
    let inflateInit2_: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, Int32) -> Int32
    let inflate: @convention(c) (UnsafeMutableRawPointer?, Int32) -> Int32
    let inflateEnd: @convention(c) (UnsafeMutableRawPointer?) -> Int32

    // `zlib.h`
    static let Z_OK: Int32 = 0
    static let Z_STREAM_END: Int32 = 1
    static let Z_NEED_DICT: Int32 = 2
    static let Z_BUF_ERROR: Int32 = -5
    static let Z_NO_FLUSH: Int32 = 0

    /// The library, loaded on first use, or `nil` where it cannot be.
    static let loaded: Zlib? = Zlib()

    private init?() {
      guard
        let handle = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL) ?? dlopen("libz.so", RTLD_NOW | RTLD_LOCAL)
      else { return nil }
      // The handle stays open for the life of the process: the pointers below point into it.
      guard let version = dlsym(handle, "zlibVersion"), let initialize = dlsym(handle, "inflateInit2_"),
        let inflate = dlsym(handle, "inflate"), let end = dlsym(handle, "inflateEnd")
      else { return nil }
      zlibVersion = unsafeBitCast(version, to: (@convention(c) () -> UnsafePointer<CChar>?).self)
      inflateInit2_ = unsafeBitCast(
        initialize,
        to: (@convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, Int32) -> Int32).self)
      self.inflate = unsafeBitCast(
        inflate, to: (@convention(c) (UnsafeMutableRawPointer?, Int32) -> Int32).self)
      inflateEnd = unsafeBitCast(end, to: (@convention(c) (UnsafeMutableRawPointer?) -> Int32).self)
    }
  }

  /// zlib's `z_stream`, field for field (64-bit Linux: 112 bytes).
  ///
  /// zlib keeps a pointer back to it, so it lives at one address for its whole life (`Inflater`
  /// allocates it).
  private struct ZStream {
    var nextIn: UnsafeMutablePointer<UInt8>? = nil
    var availableIn: UInt32 = 0
    var totalIn: UInt = 0
    var nextOut: UnsafeMutablePointer<UInt8>? = nil
    var availableOut: UInt32 = 0
    var totalOut: UInt = 0
    var message: UnsafePointer<CChar>? = nil
    var state: OpaquePointer? = nil
    var allocate: OpaquePointer? = nil
    var free: OpaquePointer? = nil
    var opaque: OpaquePointer? = nil
    var dataType: Int32 = 0
    var adler: UInt = 0
    var reserved: UInt = 0
  }

  /// One decoding stream of a `ContentDecoder`.
  private protocol StreamDecoder: AnyObject {
    /// Whether the coded stream has ended; later bytes are ignored.
    var ended: Bool { get }
    /// Whether any input went in.
    var consumed: Bool { get set }
    /// Decodes `input` (not empty, the stream not ended), passing each piece of output (at
    /// most `output.count` bytes) to `emit`.
    func decode(
      _ input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer,
      emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
    ) throws(URLError)
  }

  extension StreamDecoder {
    /// Decodes `input` unless it is empty or the stream has ended (later bytes are ignored, as
    /// libcurl ignores them).
    func feed(
      _ input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer,
      emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
    ) throws(URLError) {
      guard !ended, !input.isEmpty else { return }
      consumed = true
      try decode(input, output: output, emit: emit)
    }
  }

  /// The system's brotli decoder (`libbrotlidec.so.1`, which libcurl links for the same
  /// purpose), loaded at run time as `Zlib` is.
  final class Brotli: Sendable {
    // Safety of `Sendable`: constant function pointers looked up once; the decoder's functions
    // are reentrant on distinct instances.
    let create: @convention(c) (OpaquePointer?, OpaquePointer?, UnsafeMutableRawPointer?) -> OpaquePointer?
    let decompress:
      @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<Int>?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
        UnsafeMutablePointer<Int>?, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
        UnsafeMutablePointer<Int>?
      ) -> Int32
    let destroy: @convention(c) (OpaquePointer?) -> Void
    let errorCode: @convention(c) (OpaquePointer?) -> Int32
    let errorString: @convention(c) (Int32) -> UnsafePointer<CChar>?

    // `brotli/decode.h`
    static let error: Int32 = 0
    static let success: Int32 = 1
    static let needsMoreInput: Int32 = 2
    static let needsMoreOutput: Int32 = 3

    /// The library, loaded on first use, or `nil` where it cannot be.
    static let loaded: Brotli? = Brotli()

    private init?() {
      guard let handle = dlopen("libbrotlidec.so.1", RTLD_NOW | RTLD_LOCAL),
        let create = dlsym(handle, "BrotliDecoderCreateInstance"),
        let decompress = dlsym(handle, "BrotliDecoderDecompressStream"),
        let destroy = dlsym(handle, "BrotliDecoderDestroyInstance"),
        let errorCode = dlsym(handle, "BrotliDecoderGetErrorCode"),
        let errorString = dlsym(handle, "BrotliDecoderErrorString")
      else { return nil }
      self.create = unsafeBitCast(create, to: type(of: self.create))
      self.decompress = unsafeBitCast(decompress, to: type(of: self.decompress))
      self.destroy = unsafeBitCast(destroy, to: type(of: self.destroy))
      self.errorCode = unsafeBitCast(errorCode, to: type(of: self.errorCode))
      self.errorString = unsafeBitCast(errorString, to: type(of: self.errorString))
    }
  }

  /// One brotli decoding stream.
  private final class BrotliStream: StreamDecoder {
    private let brotli: Brotli
    private let state: OpaquePointer
    private(set) var ended = false
    var consumed = false

    init(brotli: Brotli) throws(URLError) {
      guard let state = brotli.create(nil, nil, nil) else {
        throw ContentDecoder.failure("the brotli decoder could not start")
      }
      self.brotli = brotli
      self.state = state
    }

    deinit {
      brotli.destroy(state)
    }

    func decode(
      _ input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer,
      emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
    ) throws(URLError) {
      var availableIn = input.count
      var nextIn: UnsafePointer<UInt8>? = input.baseAddress!.assumingMemoryBound(to: UInt8.self)
      while true {
        var availableOut = output.count
        var nextOut: UnsafeMutablePointer<UInt8>? = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let result = brotli.decompress(state, &availableIn, &nextIn, &availableOut, &nextOut, nil)
        let count = output.count - availableOut
        if count > 0 { try emit(UnsafeRawBufferPointer(rebasing: output[..<count])) }
        switch result {
        case Brotli.success:
          ended = true
          return
        case Brotli.needsMoreOutput:
          continue
        case Brotli.needsMoreInput:
          return
        default:
          let reason =
            brotli.errorString(brotli.errorCode(state)).map { String(cString: $0) } ?? "brotli error"
          throw ContentDecoder.failure(reason)
        }
      }
    }
  }

  /// The system's Zstandard decoder (`libzstd.so.1`, which libcurl links for the same
  /// purpose), loaded at run time as `Zlib` is.
  final class Zstd: Sendable {
    // Safety of `Sendable`: constant function pointers looked up once; the decoder's functions
    // are reentrant on distinct streams.
    let create: @convention(c) () -> OpaquePointer?
    let free: @convention(c) (OpaquePointer?) -> Int
    let setParameter: @convention(c) (OpaquePointer?, Int32, Int32) -> Int
    /// `ZSTD_decompressStream(stream, &out, &in)`; the buffers are an `OutBuffer` and an
    /// `InBuffer`, passed as raw pointers (a Swift struct is not a C type to Swift).
    let decompress: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int
    let isError: @convention(c) (Int) -> UInt32
    let errorName: @convention(c) (Int) -> UnsafePointer<CChar>?

    /// `ZSTD_inBuffer`, field for field (a pointer and two `size_t`: 24 bytes, as in C).
    struct InBuffer {
      var source: UnsafeRawPointer?
      var size: Int
      var position: Int
    }

    /// `ZSTD_outBuffer`, field for field.
    struct OutBuffer {
      var destination: UnsafeMutableRawPointer?
      var size: Int
      var position: Int
    }

    // `zstd.h`
    static let windowLogMax: Int32 = 100
    /// The largest window a body may need, as a power of two: 8 MiB, the size RFC 8878 §3.1.1.1.2
    /// asks an HTTP decoder to support and lets it refuse beyond, so that a response cannot make
    /// the decoder reserve 128 MiB or more (zstd's own default allows 2^27).
    static let largestWindowLog: Int32 = 23

    /// The library, loaded on first use, or `nil` where it cannot be.
    static let loaded: Zstd? = Zstd()

    private init?() {
      guard let handle = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL),
        let create = dlsym(handle, "ZSTD_createDStream"),
        let free = dlsym(handle, "ZSTD_freeDStream"),
        let setParameter = dlsym(handle, "ZSTD_DCtx_setParameter"),
        let decompress = dlsym(handle, "ZSTD_decompressStream"),
        let isError = dlsym(handle, "ZSTD_isError"),
        let errorName = dlsym(handle, "ZSTD_getErrorName")
      else { return nil }
      self.create = unsafeBitCast(create, to: type(of: self.create))
      self.free = unsafeBitCast(free, to: type(of: self.free))
      self.setParameter = unsafeBitCast(setParameter, to: type(of: self.setParameter))
      self.decompress = unsafeBitCast(decompress, to: type(of: self.decompress))
      self.isError = unsafeBitCast(isError, to: type(of: self.isError))
      self.errorName = unsafeBitCast(errorName, to: type(of: self.errorName))
    }

    /// zstd's name for the error `code`.
    func name(of code: Int) -> String {
      errorName(code).map { String(cString: $0) } ?? "zstd error"
    }
  }

  /// One Zstandard decoding stream: the body's first frame (bytes after it are ignored, as
  /// after a gzip member).
  private final class ZstdStream: StreamDecoder {
    private let zstd: Zstd
    private let stream: OpaquePointer
    private(set) var ended = false
    var consumed = false

    init(zstd: Zstd) throws(URLError) {
      guard let stream = zstd.create() else {
        throw ContentDecoder.failure("the zstd decoder could not start")
      }
      self.zstd = zstd
      self.stream = stream
      let set = zstd.setParameter(stream, Zstd.windowLogMax, Zstd.largestWindowLog)
      guard zstd.isError(set) == 0 else {
        _ = zstd.free(stream)
        throw ContentDecoder.failure("the zstd decoder could not be limited: \(zstd.name(of: set))")
      }
    }

    deinit {
      _ = zstd.free(stream)
    }

    func decode(
      _ input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer,
      emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
    ) throws(URLError) {
      var source = Zstd.InBuffer(source: input.baseAddress, size: input.count, position: 0)
      while true {
        var target = Zstd.OutBuffer(destination: output.baseAddress, size: output.count, position: 0)
        let result = withUnsafeMutablePointer(to: &target) { target in
          withUnsafeMutablePointer(to: &source) { source in
            zstd.decompress(stream, UnsafeMutableRawPointer(target), UnsafeMutableRawPointer(source))
          }
        }
        if zstd.isError(result) != 0 { throw ContentDecoder.failure(zstd.name(of: result)) }
        if target.position > 0 { try emit(UnsafeRawBufferPointer(rebasing: output[..<target.position])) }
        // 0: the frame is decoded and all of it flushed.
        if result == 0 {
          ended = true
          return
        }
        // All input taken and room left in the output: everything decodable so far is out.
        if source.position == source.size, target.position < target.size { return }
      }
    }
  }

  /// One zlib inflate stream: gzip, or deflate with or without its zlib wrapper.
  private final class Inflater: StreamDecoder {
    private let zlib: Zlib
    private let stream = UnsafeMutablePointer<ZStream>.allocate(capacity: 1)
    private var initialized = false
    private(set) var ended = false
    /// Whether any output came out (a raw-deflate retry is only tried before).
    private var produced = false
    var consumed = false
    private let coding: ContentCoding
    /// For deflate: whether the zlib wrapper was missing and the stream is read as raw deflate.
    private var raw = false
    /// For deflate, until output comes: the first input bytes, to be read again as raw deflate
    /// if the wrapper turns out missing (zlib says so within the first two bytes).
    private var head: [UInt8] = []

    init(_ coding: ContentCoding, zlib: Zlib) throws(URLError) {
      self.zlib = zlib
      self.coding = coding
      try start()
    }

    deinit {
      if initialized { _ = zlib.inflateEnd(stream) }
      stream.deallocate()
    }

    private func start() throws(URLError) {
      if initialized { _ = zlib.inflateEnd(stream) }
      stream.initialize(to: ZStream())
      // gzip: 15 + 32 detects a gzip or zlib header, as libcurl reads gzip; deflate: the zlib
      // wrapper (15), or raw deflate (-15) when the wrapper is missing, as servers often send.
      let bits: Int32 = coding == .gzip ? 15 + 32 : (raw ? -15 : 15)
      let status = zlib.inflateInit2_(
        stream, bits, zlib.zlibVersion(), Int32(MemoryLayout<ZStream>.size))
      guard status == Zlib.Z_OK else { throw ContentDecoder.failure("zlib could not start (\(status))") }
      initialized = true
    }

    func decode(
      _ input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer,
      emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
    ) throws(URLError) {
      let before = head
      if coding == .deflate, !raw, !produced, head.count < 64 { head += input.prefix(64) }
      var offset = 0
      while offset < input.count && !ended {
        // `avail_in` is 32 bits: a larger input goes in slices.
        let slice = min(input.count - offset, Int(UInt32.max))
        stream.pointee.nextIn = UnsafeMutablePointer(
          mutating: input.baseAddress!.assumingMemoryBound(to: UInt8.self) + offset)
        stream.pointee.availableIn = UInt32(slice)
        while true {
          stream.pointee.nextOut = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
          stream.pointee.availableOut = UInt32(output.count)
          let status = zlib.inflate(stream, Zlib.Z_NO_FLUSH)
          let count = output.count - Int(stream.pointee.availableOut)
          if count > 0 {
            produced = true
            try emit(UnsafeRawBufferPointer(rebasing: output[..<count]))
          }
          if status == Zlib.Z_STREAM_END {
            ended = true
            break
          }
          if status == Zlib.Z_OK || status == Zlib.Z_BUF_ERROR {
            // No more room to fill: go round; no more input: the slice is done.
            if stream.pointee.availableIn == 0 && stream.pointee.availableOut != 0 { break }
            if status == Zlib.Z_BUF_ERROR && count == 0 { break }
            continue
          }
          if coding == .deflate, !raw, !produced, before.count < 64 {
            // No zlib wrapper: read the same bytes again as raw deflate.
            raw = true
            head = []
            try start()
            let again = before + input
            try again.withUnsafeBytes { bytes in
              Result { () throws(URLError) in try feed(bytes, output: output, emit: emit) }
            }.get()
            return
          }
          let reason =
            status == Zlib.Z_NEED_DICT
            ? "the stream needs a preset dictionary"
            : stream.pointee.message.map { String(cString: $0) } ?? "zlib error \(status)"
          throw ContentDecoder.failure(reason)
        }
        offset += slice - Int(stream.pointee.availableIn)
        if stream.pointee.availableIn > 0 && !ended {
          // zlib took less than it was given without ending: it cannot go on.
          throw ContentDecoder.failure("zlib stopped before the end of its input")
        }
      }
    }
  }
#endif

/// A content coding the socket transport decodes (`Content-Encoding`).
enum ContentCoding: Sendable, Equatable {
  case gzip
  case deflate
  case brotli
  case zstd

  /// The codings of a `Content-Encoding` field, in the order they were applied, when every one
  /// is known (`gzip`, `x-gzip`, `deflate`, `br`, `zstd`; `identity` is dropped) and there are at most
  /// `ContentDecoder.maximumCodings`; `nil` otherwise, and the body is passed on as it is.
  static func parse(_ values: [String]) -> [ContentCoding]? {
    var codings: [ContentCoding] = []
    for element in values.flatMap({ $0.utf8.split(separator: UInt8(ascii: ",")) }) {
      let name = FieldSyntax.asciiLowercased(
        String(decoding: FieldSyntax.trimmingWhitespace(element), as: UTF8.self))
      switch name {
      case "", "identity": continue
      case "gzip", "x-gzip": codings.append(.gzip)
      case "deflate": codings.append(.deflate)
      case "br": codings.append(.brotli)
      case "zstd": codings.append(.zstd)
      default: return nil
      }
    }
    return codings.count <= ContentDecoder.maximumCodings ? codings : nil
  }
}

/// Decodes a body sent with a `Content-Encoding` of gzip, deflate, br or zstd as its bytes arrive, in
/// pieces of at most `pieceSize` bytes, so that a size limit counted on what comes out stops a
/// decompression bomb after one piece past it.
///
/// For the socket transport's ordinary requests, which ask for `gzip, deflate, br, zstd` as
/// FoundationNetworking does and deliver the decoded body with the response's fields unchanged
/// (`Content-Encoding` and `Content-Length` still say what was sent).
final class ContentDecoder {
  /// The most codings applied one over another that are decoded (each can multiply the size).
  static let maximumCodings = 2
  /// The largest piece passed on.
  static let pieceSize = 64 * 1024

  #if canImport(Glibc)
    /// Innermost (last applied) first: the order the bytes go through them.
    private let inflaters: [any StreamDecoder]
    private let buffers: [UnsafeMutableRawBufferPointer]
  #endif

  /// The codings' decoder, or `nil` when there is nothing to decode or zlib cannot be loaded.
  init?(_ codings: [ContentCoding]) throws(URLError) {
    #if canImport(Glibc)
      guard !codings.isEmpty else { return nil }
      var inflaters: [any StreamDecoder] = []
      for coding in codings.reversed() {
        if coding == .brotli {
          guard let brotli = Brotli.loaded else { return nil }
          inflaters.append(try BrotliStream(brotli: brotli))
        } else if coding == .zstd {
          guard let zstd = Zstd.loaded else { return nil }
          inflaters.append(try ZstdStream(zstd: zstd))
        } else {
          guard let zlib = Zlib.loaded else { return nil }
          inflaters.append(try Inflater(coding, zlib: zlib))
        }
      }
      self.inflaters = inflaters
      buffers = inflaters.map { _ in
        UnsafeMutableRawBufferPointer.allocate(byteCount: Self.pieceSize, alignment: 1)
      }
    #else
      return nil
    #endif
  }

  deinit {
    #if canImport(Glibc)
      for buffer in buffers { buffer.deallocate() }
    #endif
  }

  /// The codings to ask for (`Accept-Encoding`): those whose library can be loaded, as
  /// FoundationNetworking's libcurl asks for those it was built with; `nil` for none.
  static let acceptedCodings: String? = {
    #if canImport(Glibc)
      let names =
        (Zlib.loaded != nil ? ["gzip", "deflate"] : []) + (Brotli.loaded != nil ? ["br"] : [])
        + (Zstd.loaded != nil ? ["zstd"] : [])
      return names.isEmpty ? nil : names.joined(separator: ", ")
    #else
      return nil
    #endif
  }()

  /// Decodes `bytes` (the next bytes of the body as sent), passing the decoded pieces to `emit`.
  ///
  /// - Throws: `URLError(.cannotDecodeContentData)` for bytes that are not in the coding, or
  ///   what `emit` throws.
  func decode(
    _ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
  ) throws(URLError) {
    #if canImport(Glibc)
      try decode(bytes, stage: 0, emit: emit)
    #endif
  }

  #if canImport(Glibc)
    private func decode(
      _ bytes: UnsafeRawBufferPointer, stage: Int, emit: (UnsafeRawBufferPointer) throws(URLError) -> Void
    ) throws(URLError) {
      guard stage < inflaters.count else { return try emit(bytes) }
      try inflaters[stage].feed(bytes, output: buffers[stage]) { piece throws(URLError) in
        try decode(piece, stage: stage + 1, emit: emit)
      }
    }
  #endif

  /// Checks that the body ended where its coding ends.
  ///
  /// An empty body is accepted (a server that declares an encoding for no bytes).
  ///
  /// - Throws: `URLError(.cannotDecodeContentData)` for a body cut short.
  func finish() throws(URLError) {
    #if canImport(Glibc)
      guard let outer = inflaters.first, outer.consumed else { return }
      if inflaters.contains(where: { $0.consumed && !$0.ended }) {
        throw Self.failure("the compressed body ended before its coding did")
      }
    #endif
  }

  /// The error of a body that cannot be decoded, in libcurl's words, which `TransportFailure`
  /// knows.
  static func failure(_ reason: String) -> URLError {
    URLError(
      .cannotDecodeContentData,
      userInfo: [
        NSLocalizedDescriptionKey:
          "Error while processing content unencoding: \(reason) (the body is not in the Content-Encoding the response declares)"
      ])
  }
}
