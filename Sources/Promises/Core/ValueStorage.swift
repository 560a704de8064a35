/// The two words in which a promise keeps its value once fulfilled, and two references before.
///
/// The invariant (Docs/Design.md, "Invariants", I1): while the promise is not fulfilled, word
/// 0 is its `upstream` and word 1 its `extras`, each the bit pattern of a retained reference
/// (0 for none). From fulfilment on, the words hold the value: in place when `Value` fits in
/// two words with word alignment, else a pointer to one boxed value. The promise's
/// `state.phase == .fulfilled` says which of the two holds; a fulfilment moves the references
/// out (`takeReferences`) under the promise's lock before it stores the value.
///
/// Raw words rather than a `Value?` and two optional references: in the unspecialized code a
/// node runs, every access to an `Optional<Value>` looks its metadata up at run time (the
/// value's own metadata comes with the promise), and sharing the storage keeps a link at 88
/// bytes (glibc's 96-byte chunks) instead of 104 (Docs/Performance.md).
///
/// Every method is a few loads and stores, inlined; none checks the phase, which is the
/// owner's business.
@usableFromInline
struct ValueStorage {
  @usableFromInline var words: (UInt, UInt) = (0, 0)

  @usableFromInline
  init() {}

  /// Whether either word is set: references held, or a value stored.
  @inline(__always)
  var isOccupied: Bool { words != (0, 0) }

  // MARK: Before fulfilment: two references

  /// The upstream reference, not retained (meaningful only while not fulfilled).
  @inline(__always)
  var unmanagedUpstream: Unmanaged<_PromiseNode>? { Self.unmanaged(words.0, as: _PromiseNode.self) }

  /// The upstream promise (meaningful only while not fulfilled).
  @inline(__always)
  var upstream: _PromiseNode? { unmanagedUpstream?.takeUnretainedValue() }

  /// The rarely used parts (meaningful only while not fulfilled).
  @inline(__always)
  var extras: PromiseExtras? { Self.unmanaged(words.1, as: PromiseExtras.self)?.takeUnretainedValue() }

  /// Stores `upstream`, releasing the reference the word held.
  ///
  /// The release is never the last reference where this runs under a lock: every such caller
  /// read the old value first and releases its copy after unlocking.
  @inline(__always)
  mutating func setUpstream(_ upstream: _PromiseNode?) {
    Self.replace(&words.0, with: upstream)
  }

  /// Stores `extras`, releasing the reference the word held (see `setUpstream`).
  @inline(__always)
  mutating func setExtras(_ extras: PromiseExtras?) {
    Self.replace(&words.1, with: extras)
  }

  /// Moves both references out (the caller owns what it gets) and clears the words: before a
  /// fulfilment stores the value, under the promise's lock.
  @inline(__always)
  mutating func takeReferences() -> (upstream: _PromiseNode?, extras: PromiseExtras?) {
    let (upstreamBits, extrasBits) = words
    words = (0, 0)
    return (
      Self.unmanaged(upstreamBits, as: _PromiseNode.self)?.takeRetainedValue(),
      Self.unmanaged(extrasBits, as: PromiseExtras.self)?.takeRetainedValue()
    )
  }

  /// Releases both references, for a promise that goes without being fulfilled.
  mutating func releaseReferences() {
    let (upstream, extras) = takeReferences()
    _ = (upstream, extras)
  }

  @inline(__always)
  private static func unmanaged<Object: AnyObject>(_ bits: UInt, as _: Object.Type) -> Unmanaged<Object>? {
    guard let pointer = UnsafeRawPointer(bitPattern: bits) else { return nil }
    return Unmanaged<Object>.fromOpaque(pointer)
  }

  @inline(__always)
  private static func replace<Object: AnyObject>(_ bits: inout UInt, with object: Object?) {
    let old = bits
    bits = object.map { UInt(bitPattern: Unmanaged.passRetained($0).toOpaque()) } ?? 0
    unmanaged(old, as: Object.self)?.release()
  }

  // MARK: From fulfilment on: the value

  /// Whether a `Value` is stored in the words themselves rather than boxed.
  @usableFromInline @inline(__always)
  static func storesInline<Value>(_: Value.Type) -> Bool {
    MemoryLayout<Value>.size <= MemoryLayout<(UInt, UInt)>.size
      && MemoryLayout<Value>.alignment <= MemoryLayout<UInt>.alignment
  }

  /// Initializes the words with `value`; the references must have been taken out.
  @inline(__always)
  mutating func initialize<Value>(to value: Value) {
    if Self.storesInline(Value.self) {
      // Pointer arguments rather than `withUnsafe…` closures: in the unspecialized code a
      // node runs, those closures are not inlined and cost a call and a context each.
      Self.initialize(at: &words, to: value)
    } else {
      let box = UnsafeMutablePointer<Value>.allocate(capacity: 1)
      box.initialize(to: value)
      words.0 = UInt(bitPattern: box)
    }
  }

  /// A copy of the stored value.
  ///
  /// Reads from a copy of the words, not from `&words`: an inout access counts as a
  /// modification, and concurrent readers of a settled promise would then race. The words
  /// are copied bit for bit; the load makes the proper (retaining) copy of the value.
  @inline(__always)
  func load<Value>(as _: Value.Type) -> Value {
    var copy = words
    if Self.storesInline(Value.self) {
      return Self.load(at: &copy)
    }
    return UnsafePointer<Value>(bitPattern: copy.0).unsafelyUnwrapped.pointee
  }

  /// Destroys the stored value (and frees its box).
  @inline(__always)
  mutating func destroy<Value>(as _: Value.Type) {
    if Self.storesInline(Value.self) {
      // Trivial values (integers, plain structs) need no clean-up.
      if !_isPOD(Value.self) { Self.deinitialize(at: &words, as: Value.self) }
    } else {
      let box = UnsafeMutablePointer<Value>(bitPattern: words.0).unsafelyUnwrapped
      box.deinitialize(count: 1)
      box.deallocate()
    }
  }

  @inline(__always)
  private static func initialize<Value>(at words: UnsafeMutableRawPointer, to value: Value) {
    words.initializeMemory(as: Value.self, to: value)
  }

  @inline(__always)
  private static func load<Value>(at words: UnsafeRawPointer) -> Value {
    words.assumingMemoryBound(to: Value.self).pointee
  }

  @inline(__always)
  private static func deinitialize<Value>(at words: UnsafeMutableRawPointer, as _: Value.Type) {
    words.assumingMemoryBound(to: Value.self).deinitialize(count: 1)
  }
}

/// The rarely used parts of a pending promise (its cancellation handlers), allocated on demand.
final class PromiseExtras {
  var cancelHandlers: [@Sendable () -> Void] = []
}
