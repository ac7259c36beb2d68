// swift-tools-version:6.0
// The Swift run-loop benchmark against swift-nio's EventLoop and Foundation,
// in its own package so that the library itself depends on nothing:
//   cd bench/nio && swift run -c release swiftthreads-nio-bench
// and its memory rows (swiftthreads-memory-bench), or `make bench-nio` and
// `make bench-memory-swift` from the top of the tree.
import PackageDescription

// A path dependency is known by its folder's name: the clone's top folder
// (two levels up from this manifest), whatever it is called.
let root = String(#filePath.split(separator: "/").dropLast(3).last!).lowercased()

/// SwiftThreads, swift-nio's event loops and Foundation: what both
/// benchmarks are built against.
let dependencies: [Target.Dependency] = [
    .product(name: "SwiftThreads", package: root),
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
]

let package = Package(
    name: "swiftthreads-nio-bench",
    dependencies: [
        .package(path: "../.."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.0"),
    ],
    targets: [
        // A benchmark sharing plain counters and semaphores between its
        // own threads: Swift 5 mode keeps it free of Sendable ceremony.
        .executableTarget(name: "swiftthreads-nio-bench", dependencies: dependencies,
                          swiftSettings: [.swiftLanguageMode(.v5)]),
        // The memory rows (RSS per timer, loop thread, idle connection):
        // Swift 6 language mode, strict concurrency.
        .executableTarget(name: "swiftthreads-memory-bench", dependencies: dependencies,
                          swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
