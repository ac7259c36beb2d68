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
    ],
    targets: [
        .target(
            name: "CRunLoop",
            path: ".",
            sources: ["Sources/CRunLoop"],
            publicHeadersPath: "include",
            cSettings: [
                .headerSearchPath("Sources/CRunLoop"),
                .define("_GNU_SOURCE"),
            ],
            linkerSettings: [
                .linkedLibrary("bsd"),
                .linkedLibrary("BlocksRuntime"),
                .linkedLibrary("pthread"),
                .linkedLibrary("m"),
            ]
        ),
        .target(
            name: "SwiftThreads",
            dependencies: ["CRunLoop"],
            path: "Sources/SwiftThreads",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "swiftthreads-demo",
            dependencies: ["SwiftThreads"],
            path: "examples/swift",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(name: "swiftthreads-bench", dependencies: ["SwiftThreads"], path: "bench/swift", swiftSettings: [.swiftLanguageMode(.v6)]),
        .testTarget(
            name: "SwiftThreadsTests",
            dependencies: ["SwiftThreads"],
            path: "Tests/SwiftThreadsTests",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
