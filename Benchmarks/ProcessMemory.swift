import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Resident memory of this process, read from `/proc/self/status` (Linux only; nil elsewhere).
enum ProcessMemory {
  /// VmRSS: resident bytes now.
  static func residentBytes() -> Int? { statusField("VmRSS") }

  /// VmHWM: the high-water mark of resident bytes since start or since the last `resetPeak()`.
  static func peakResidentBytes() -> Int? { statusField("VmHWM") }

  /// Resets VmHWM to the current VmRSS by writing "5" to `/proc/self/clear_refs` (Linux ≥ 4.0).
  /// Returns false where that is not possible; the peak is then process-wide since start.
  @discardableResult
  static func resetPeak() -> Bool {
    #if os(Linux)
      let descriptor = open("/proc/self/clear_refs", O_WRONLY)
      guard descriptor >= 0 else { return false }
      defer { close(descriptor) }
      return write(descriptor, "5", 1) == 1
    #else
      return false
    #endif
  }

  /// Whether `resetPeak()` works here (probed once).
  static let canResetPeak = resetPeak()

  /// Asks glibc to give freed heap memory back to the system (`malloc_trim(0)`), so that VmRSS at
  /// the start of a sample does not include memory the previous sample freed. `malloc_trim` is not
  /// exported by the Glibc module, so it is looked up dynamically.
  static func returnFreeMemoryToSystem() {
    #if os(Linux)
      typealias MallocTrim = @convention(c) (Int) -> Int32
      guard let symbol = dlsym(nil, "malloc_trim") else { return }
      _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
    #endif
  }

  private static func statusField(_ key: String) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else {
      return nil
    }
    for line in status.split(separator: "\n") where line.hasPrefix(key + ":") {
      // "VmHWM:     123456 kB"
      let fields = line.split(separator: " ", omittingEmptySubsequences: true)
      guard fields.count >= 2, let kilobytes = Int(fields[1]) else { return nil }
      return kilobytes * 1024
    }
    return nil
  }
}
