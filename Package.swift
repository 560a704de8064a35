// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [
  .swiftLanguageMode(.v6)
]

let package = Package(
  name: "Promises",
  // Synchronization's `Atomic` and `Mutex`, which the core uses, need these; Linux has no
  // minimum. Only Linux is built and tested (see the README).
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "Promises", targets: ["Promises"]),
    .library(name: "PromiseHTTP", targets: ["PromiseHTTP"]),
    .executable(name: "ConfigStory", targets: ["ConfigStory"]),
    .executable(name: "Benchmarks", targets: ["Benchmarks"]),
  ],
  targets: [
    .target(name: "CPromisesSupport"),
    .target(name: "Promises", dependencies: ["CPromisesSupport"], swiftSettings: strict),
    .target(name: "PromiseHTTP", dependencies: ["Promises"], swiftSettings: strict),
    // An in-process HTTP/1.1 server on loopback sockets with fault injection: used by the
    // tests, the story example and the benchmarks. Not a product.
    .target(name: "LoopbackHTTPServer", swiftSettings: strict),
    .executableTarget(
      name: "ConfigStory",
      dependencies: ["Promises", "PromiseHTTP", "LoopbackHTTPServer"],
      swiftSettings: strict
    ),
    .executableTarget(
      name: "Benchmarks",
      dependencies: ["Promises", "PromiseHTTP", "LoopbackHTTPServer"],
      path: "Benchmarks",
      swiftSettings: strict
    ),
    .testTarget(name: "PromisesTests", dependencies: ["Promises"], swiftSettings: strict),
    .testTarget(
      name: "PromiseHTTPTests",
      dependencies: ["Promises", "PromiseHTTP", "LoopbackHTTPServer"],
      swiftSettings: strict
    ),
    .testTarget(
      name: "DocTests",
      dependencies: ["Promises", "PromiseHTTP", "LoopbackHTTPServer"],
      // A file sees only the members of the modules it imports itself (SE-0444), as it sees only
      // their top-level names: DocImportsTests can then prove that each page's code compiles
      // with the imports the page shows.
      swiftSettings: strict + [.enableUpcomingFeature("MemberImportVisibility")]
    ),
  ]
)
