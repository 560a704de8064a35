import Dispatch
import Synchronization

extension DispatchQueue {
  /// The queue that promise callbacks run on when no `on:` queue is given.
  ///
  /// By default a private serial queue, `com.promises.default`: callbacks registered without
  /// a queue run one at a time, in order, on a Dispatch worker thread. It needs no run loop and
  /// no `dispatchMain()`, so it works in a Linux command-line program, a test, or a server.
  /// It is deliberately not `DispatchQueue.main`: a command-line program that blocks its main
  /// thread in `wait(timeout:)` would otherwise deadlock. An app that wants UI callbacks
  /// passes `on: .main` per call, or sets this once at launch: `DispatchQueue.promises = .main`.
  ///
  /// Reading and setting it is thread-safe (an atomic reference); a change applies to chains
  /// created afterwards.
  public static var promises: DispatchQueue {
    get { DefaultQueue.current }
    set { DefaultQueue.set(newValue) }
  }
}

/// Storage for `DispatchQueue.promises`: an atomic pointer, read without a lock on every `then`.
enum DefaultQueue {
  static let initial = DispatchQueue(label: "com.promises.default")
  // Holds an unmanaged, +1-retained queue. A replaced queue is deliberately kept alive
  // (leaked): a reader may have loaded its pointer just before the swap. Setting the default
  // queue is a once-at-launch operation, so the leak is bounded by the number of sets.
  static let pointer = Atomic<UInt>(UInt(bitPattern: Unmanaged.passRetained(initial).toOpaque()))

  static var current: DispatchQueue {
    let bits = pointer.load(ordering: .acquiring)
    return Unmanaged<DispatchQueue>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue()
  }

  static func set(_ queue: DispatchQueue) {
    pointer.store(UInt(bitPattern: Unmanaged.passRetained(queue).toOpaque()), ordering: .releasing)
  }
}
