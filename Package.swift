// swift-tools-version:6.0
// CRunLoop (C core) + SwiftThreads (Swift overlay). The C target is declared
// with path "." so that its public headers can live in the top-level
// include/ folder that the Makefile also installs (SwiftPM refuses a
// publicHeadersPath outside the target's path). A plain `swift build` needs
// libbsd-dev: run scripts/setup-deps.sh (or `make check`) once.
import PackageDescription

let package = Package(
    name: "CRunLoop",
    products: [
        .library(name: "CRunLoop", targets: ["CRunLoop"]),
        .library(name: "SwiftThreads", targets: ["SwiftThreads"]),
        // Foundation `Date` overloads for the SwiftThreads APIs that take a
        // date; SwiftThreads itself does not link Foundation.
        .library(name: "SwiftThreadsFoundation", targets: ["SwiftThreadsFoundation"]),
        // A run loop's statistics exported through swift-metrics (counters,
        // gauges per loop); SwiftThreads itself depends on no package.
        .library(name: "SwiftThreadsMetrics", targets: ["SwiftThreadsMetrics"]),
    ],
    dependencies: [
        // Only for `swift package generate-documentation` (the DocC catalog
        // in Sources/SwiftThreads/SwiftThreads.docc): a command plugin, which
        // no target depends on, so building and testing never build it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // Only for the SwiftThreadsMetrics product and its tests.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "CRunLoop",
            path: ".",
            sources: ["Sources/CRunLoop"],
            publicHeadersPath: "include",
            cSettings: [
                // The core's rooms, one folder each (docs/architecture.md).
                .headerSearchPath("Sources/CRunLoop/base"),
                .headerSearchPath("Sources/CRunLoop/sync"),
                .headerSearchPath("Sources/CRunLoop/kernel"),
                .headerSearchPath("Sources/CRunLoop/queue"),
                .headerSearchPath("Sources/CRunLoop/loop"),
                .headerSearchPath("Sources/CRunLoop/perform"),
                .headerSearchPath("Sources/CRunLoop/thread"),
                .headerSearchPath("Sources/CRunLoop/io"),
                .headerSearchPath("Sources/CRunLoop/ports"),
                .define("_GNU_SOURCE"),
            ],
            linkerSettings: [
                .linkedLibrary("bsd"),
                // liburing (liburing-dev): the io_uring kernel backend.
                .linkedLibrary("uring"),
                // The Swift toolchain's BlocksRuntime (swiftc puts its lib
                // folder first), the one Foundation and Dispatch use. The
                // Makefile's C library uses Debian's instead; see the
                // Makefile for why a program with both still uses one.
                .linkedLibrary("BlocksRuntime"),
                .linkedLibrary("pthread"),
                .linkedLibrary("m"),
            ]
        ),
        // The overlay's own C shims (ThreadSanitizer hand-off annotations);
        // internal, not a product.
        .target(name: "CSwiftThreadsShims", path: "Sources/CSwiftThreadsShims"),
        .target(
            name: "SwiftThreads",
            dependencies: ["CRunLoop", "CSwiftThreadsShims"],
            path: "Sources/SwiftThreads",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "SwiftThreadsMetrics",
            dependencies: ["SwiftThreads", .product(name: "Metrics", package: "swift-metrics")],
            path: "Sources/SwiftThreadsMetrics",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "SwiftThreadsMetricsTests",
            dependencies: ["SwiftThreadsMetrics", .product(name: "MetricsTestKit", package: "swift-metrics")],
            path: "Tests/SwiftThreadsMetricsTests",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "SwiftThreadsFoundation",
            dependencies: ["SwiftThreads"],
            path: "Sources/SwiftThreadsFoundation",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "swiftthreads-demo",
            dependencies: ["SwiftThreads"],
            path: "examples/swift",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The Cocoa tutorial's echo client over the Foundation-shaped streams
        // (RLInputStream / RLOutputStream), with an in-process RLSocket echo
        // server and signals as an async sequence.
        .executableTarget(
            name: "swiftthreads-echo-client",
            dependencies: ["SwiftThreads", "ExampleSupport"],
            path: "examples/swift-echo",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // What the Swift examples share (their pace, whole-line output);
        // not a product.
        .target(
            name: "ExampleSupport",
            dependencies: ["SwiftThreads"],
            path: "examples/swift-support",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The Cocoa tutorial's threaded XML parser with a delegate:
        // Foundation's XMLParser on an RLThread, reports performed on the
        // creating thread, from a file or a local RLSocket HTTP server.
        .executableTarget(
            name: "swiftthreads-threaded-parser",
            dependencies: ["SwiftThreads", "ExampleSupport"],
            path: "examples/swift-parser",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // A daemon skeleton: SIGTERM/SIGINT stop it and SIGHUP reloads it
        // (RLSignalSource on the main loop), RLWorkerThread workers started
        // and stopped with the worker lifecycle.
        .executableTarget(
            name: "swiftthreads-daemon",
            dependencies: ["SwiftThreads", "ExampleSupport"],
            path: "examples/swift-daemon",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The guide's port check-in (Listings 3-12 to 3-15) with RLPort
        // (C: port_checkin.c).
        .executableTarget(
            name: "swiftthreads-port-checkin",
            dependencies: ["SwiftThreads", "ExampleSupport"],
            path: "examples/swift-port-checkin",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The guide's check-in through message ports (Listings 3-17 to
        // 3-19) with RLMessagePort, the worker a thread, then a second
        // process (C: message_ports.c).
        .executableTarget(
            name: "swiftthreads-message-ports",
            dependencies: ["SwiftThreads", "ExampleSupport"],
            path: "examples/swift-message-ports",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // An async TCP echo server: RLAsyncServer and RLAsyncConnection,
        // clients of its own, backpressure shown.
        .executableTarget(
            name: "swiftthreads-async-echo",
            dependencies: ["SwiftThreads", "ExampleSupport"],
            path: "examples/swift-async-echo",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The main dispatch queue served by RLRunLoop.main: a program, not a
        // suite, because its main thread must run the loop (swift test runs
        // suites on other threads); scripts/run-swift-tests.sh --demo runs it.
        .executableTarget(
            name: "swiftthreads-main-queue",
            dependencies: ["SwiftThreads"],
            path: "Tests/SwiftMainQueue",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(name: "swiftthreads-bench", dependencies: ["SwiftThreads"], path: "bench/swift", swiftSettings: [.swiftLanguageMode(.v6)]),
        // swift-corelibs-foundation's own TestSocketPort.swift and
        // TestRunLoop.swift, unchanged (see its README), compiled against
        // SwiftThreads through typealiases (FoundationNames.swift) and run
        // by XCTest on the main thread; FoundationPortTestSupport is their
        // XCTestCase with waits that run the RLRunLoop.
        .target(
            name: "FoundationPortTestSupport",
            dependencies: ["SwiftThreads"],
            path: "Tests/FoundationPortTestSupport",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "FoundationPortTests",
            dependencies: ["SwiftThreads", "SwiftThreadsFoundation", "FoundationPortTestSupport"],
            path: "Tests/FoundationPortTests",
            exclude: ["README.md", "LICENSE.txt"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Code that imports SwiftThreads alone (no SwiftThreadsFoundation in
        // the target): its date properties are numbers, unambiguously.
        .testTarget(
            name: "SwiftThreadsOnlyTests",
            dependencies: ["SwiftThreads"],
            path: "Tests/SwiftThreadsOnlyTests",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "SwiftThreadsTests",
            dependencies: ["SwiftThreads", "SwiftThreadsFoundation"],
            path: "Tests/SwiftThreadsTests",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
