import Foundation
import PromiseHTTP
import Promises

// Workload 8 (only when PROMISEHTTP_BENCH_HTTPS is set): 1 GiB over HTTPS against a server the
// project did not write — nginx, say — on this machine, against curl doing the same in the same
// run. The variable names the server's base URL; PROMISEHTTP_BENCH_HTTPS_CA the PEM file of the
// authority that signed its certificate (curl --cacert; the client's
// `ServerTrust.additionalCertificates`). The server must answer `GET <base>/file.bin` with a
// body of exactly 1 GiB (8 MiB under --smoke: `file-smoke.bin`) and take `PUT <base>/upload/<name>`
// (nginx: `dav_methods PUT`), answering 2xx.
//   download-curl     `curl --cacert <ca> -o <dir>/download-curl.bin <base>/file.bin`  (baseline)
//   download-promise  `HTTPClient.download("file.bin", to: …)`, over the socket transport
//   upload-curl       `curl --cacert <ca> -T <file> <base>/upload/curl.bin`  (baseline)
//   upload-promise    `HTTPClient.upload(.file(…), to: "upload/promise.bin", method: .put)`
// A sample is one whole transfer; a download's file size is checked untimed. Memory: as in the
// transfer workload, the peak RSS growth of this process (the client alone here: the server is
// another process).
// Scripts/https-bench-server starts such an nginx (as your own process, port 8443) and prints
// the command to run.

extension Plan {
  func externalHTTPSCases() -> [BenchCase] {
    let environment = ProcessInfo.processInfo.environment
    guard let base = environment["PROMISEHTTP_BENCH_HTTPS"].flatMap(URL.init(string:)),
      let caPath = environment["PROMISEHTTP_BENCH_HTTPS_CA"]
    else { return [] }
    var workload = workload(
      "https",
      "1 file over HTTPS from an external server: download to a file, upload from a file, against curl",
      unit: "MiB", units: (full: 1_024, smoke: 8), samples: 3, measuresPeakMemory: true)
    workload.baselineVariant = "download-curl"
    workload.bytesPerUnit = 1 << 20
    workload.memoryLimitBytes = smoke ? nil : 32 << 20
    workload.memoryLimitedVariants = ["download-promise", "upload-promise"]
    let length = workload.units << 20
    let remote = smoke ? "file-smoke.bin" : "file.bin"
    let expected = length

    func client() throws -> HTTPClient {
      guard let pem = FileManager.default.contents(atPath: caPath) else {
        throw BenchmarkFailure("cannot read \(caPath)")
      }
      var configuration = HTTPClient.Configuration(
        callbackQueue: callbackQueue, timeout: .seconds(waitLimitSeconds))
      configuration.serverTrust = .init(additionalCertificates: [pem])
      return HTTPClient(baseURL: base, configuration: configuration)
    }

    func downloadCase(_ variant: String, _ run: @escaping (URL) throws -> Int) -> BenchCase {
      BenchCase(workload: workload, variant: variant, baseline: "download-curl", expected: expected) {
        let directory = try TransferScratch.makeDirectory()
        let destination = directory.appendingPathComponent("\(variant).bin")
        return TimedRun(
          body: { try run(destination) },
          verify: {
            defer { try? FileManager.default.removeItem(at: destination) }
            let size = try fileSize(destination)
            guard size == length else {
              throw BenchmarkFailure("\(variant) got \(size) bytes, expected \(length)")
            }
          })
      }
    }

    /// The upload's source: `length` bytes, written once per case's setup.
    func uploadSource() throws -> URL {
      let directory = try TransferScratch.makeDirectory()
      let url = directory.appendingPathComponent("upload-source.bin")
      guard FileManager.default.createFile(atPath: url.path, contents: nil),
        let handle = FileHandle(forWritingAtPath: url.path)
      else { throw BenchmarkFailure("cannot create \(url.path)") }
      defer { try? handle.close() }
      let block = Data(repeating: 0x5A, count: 1 << 20)
      for _ in 0..<(length >> 20) { handle.write(block) }
      return url
    }

    func uploadCase(_ variant: String, _ run: @escaping (URL) throws -> Int) -> BenchCase {
      BenchCase(workload: workload, variant: variant, baseline: "upload-curl", expected: expected) {
        let source = try uploadSource()
        return TimedRun(body: { try run(source) })
      }
    }

    let fileURL = base.appendingPathComponent(remote)
    return [
      downloadCase("download-curl") { destination in
        let result = try runCurl(["--cacert", caPath, "-o", destination.path, fileURL.absoluteString])
        guard result.status == 0 else {
          throw BenchmarkFailure("curl exited with \(result.status): \(result.standardError)")
        }
        return try fileSize(destination)
      },
      downloadCase("download-promise") { destination in
        let client = try client()
        return Int(try client.download(remote, to: destination).wait(timeout: waitLimitSeconds).byteCount)
      },
      uploadCase("upload-curl") { source in
        let target = base.appendingPathComponent("upload/curl.bin").absoluteString
        let result = try runCurl(["--cacert", caPath, "-T", source.path, target])
        guard result.status == 0 else {
          throw BenchmarkFailure("curl -T exited with \(result.status): \(result.standardError)")
        }
        return length
      },
      uploadCase("upload-promise") { source in
        let client = try client()
        _ = try client.upload(.file(source), to: "upload/promise.bin", method: .put).wait(
          timeout: waitLimitSeconds)
        return length
      },
    ]
  }
}
