import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension LoopbackServer {
  /// Makes libcurl reach the loopback origins (`127.0.0.1`, `127.0.0.2`, `localhost`) without the
  /// environment's proxy, once per process, before the first request of a test that needs it.
  ///
  /// libcurl reads `http_proxy` and `no_proxy` from the environment at each transfer, and
  /// FoundationNetworking ignores `connectionProxyDictionary`, so this is the one switch that
  /// makes tests independent of the machine's proxy settings (they pass with
  /// `http_proxy=http://127.0.0.1:9` set). It changes nothing when no proxy is set: `setenv`
  /// while other threads start processes (exit tests, curl, python) races with their reading of
  /// the environment — with it, an exit test's child exited 0 (as if it had lost the variables
  /// that make it one) in 2 of 3 whole-suite runs, in none of 4 without it.
  public static func bypassEnvironmentProxy() {
    _ = environmentProxyBypassed
  }

  private static let environmentProxyBypassed: Void = {
    let environment = ProcessInfo.processInfo.environment
    let proxied = ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY"]
      .contains { environment[$0]?.isEmpty == false }
    guard proxied else { return }
    for name in ["no_proxy", "NO_PROXY"] {
      let existing = environment[name] ?? ""
      guard !existing.contains("127.0.0.1") else { continue }
      setenv(name, (existing.isEmpty ? "" : existing + ",") + "127.0.0.1,127.0.0.2,localhost", 1)
    }
  }()
}
