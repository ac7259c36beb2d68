import Foundation
import Testing
import SwiftThreads

// Blocking calls are `@available(*, noasync)`; each has an async
// counterpart (RLConcurrency.swift). The compile probe type-checks calls
// to every blocking form from an async function against the module just
// built, and expects each to be refused; the other tests run the async
// counterparts.

/// The blocking calls, one a line, in an async function. (`sleep(for:)`,
/// `sleep(until:)` and `sendRequest(msgid:data:timeout:)` have async
/// overloads of the same name, which async functions pick.)
private let blockingCalls: [String] = [
    "RLThread.sleep(forTimeInterval: 0)",
    "RLRunLoop.current.run()",
    "RLRunLoop.current.run(until: 0)",
    "_ = RLRunLoop.current.run(mode: .default, before: 0)",
    "_ = try? RLRunLoop.current.run(mode: .default, for: 0)",
    "_ = try? RLRunLoop.current.run(mode: .default, for: Duration.zero)",
    "_ = RLRunLoop.current.runUntil { true }",
    "try? RLThread.current.perform(waitUntilDone: true) {}",
    "try? RLThread.perform(on: RLThread.main, waitUntilDone: true) {}",
    "try? RLThread.performOnMain(waitUntilDone: true) {}",
    "_ = try? RLWorkerThread().sync { 1 }",
    "try? RLWorkerThread().stop()",
    "_ = try? RLThread.current.join()",
    "_ = try? RLThread.current.join(as: Int.self)",
    "_ = try? port.sendRequest(msgid: 1, data: nil, sendTimeout: 1, receiveTimeout: 1)",
    "_ = try? port.sendRequest(msgid: 1, data: nil, timeout: Duration.seconds(1))",
    "_ = try? port.sendRequest(msgid: 1, data: nil, sendTimeout: .seconds(1), receiveTimeout: .seconds(1))",
    "lock.lock()",
    "_ = lock.lock(before: 0)",
    "_ = lock.lock(timeout: .zero)",
    "lock.unlock()",
    "recursive.lock()",
    "recursive.unlock()",
    "condition.lock()",
    "condition.wait()",
    "_ = condition.wait(until: 0)",
    "_ = condition.wait(timeout: .zero)",
    "condition.unlock()",
    "conditionLock.lock(whenCondition: 1)",
    "conditionLock.unlock(withCondition: 1)",
    "rw.readLock()",
    "_ = rw.readLock(timeout: .zero)",
    "_ = rw.writeLock(timeout: .zero)",
    "_ = condition.lock(timeout: .zero)",
    "_ = conditionLock.lock(timeout: .zero)",
    "rw.writeLock()",
    "rw.lock()",
    "rw.unlock()",
    "spin.lock()",
    "spin.unlock()",
    "anyLock.lock()",
    "anyLock.unlock()",
    "try? anyLock.checkedLock()",
]

/// The same module's non-blocking forms, which async code may call.
private let allowedCalls: [String] = [
    "try? RLThread.current.perform {}",
    "try? RLThread.perform(on: RLThread.main) {}",
    "try? RLThread.performOnMain {}",
    "try? await RLThread.sleep(for: .zero)",
    "try? await RLThread.sleep(until: 0)",
    "_ = try? await port.request(msgid: 1, timeout: 1)",
    "_ = try? await port.request(msgid: 1, timeout: .seconds(1))",
    "try? await RLWorkerThread().shutdownGracefully()",
    "_ = try? await RLThread.current.joined()",
    "_ = try? await RLThread.current.joined(as: Int.self)",
    "lock.withLock {}",
    "_ = lock.tryLock()",
    "rw.withReadLock {}",
    "anyLock.withLock {}",
]

private func probeSource(_ calls: [String]) -> String {
    """
    import SwiftThreads
    func probe(port: RLMessagePort, lock: RLLock, recursive: RLRecursiveLock, condition: RLCondition,
               conditionLock: RLConditionLock, rw: RLReadWriteLock, spin: RLSpinLock,
               anyLock: any RLLocking) async {
    \(calls.joined(separator: "\n"))
    }

    """
}

/// Type-checks `source` against the SwiftPM build's modules; the
/// compiler's output and whether it succeeded, or nil when there is no
/// compiler or build to use.
private func typeCheck(_ source: String, topLevel: Bool = false) throws -> (ok: Bool, output: String)? {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    // The modules of the build this test binary belongs to (whatever its
    // scratch path: .build, .build/tsan…), next to the binary.
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let modules = executable.deletingLastPathComponent().appendingPathComponent("Modules")
    guard FileManager.default.fileExists(atPath: modules.appendingPathComponent("SwiftThreads.swiftmodule").path)
    else { return nil }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("noasync-\(getpid())-\(UUID())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let file = dir.appendingPathComponent("probe.swift")
    try source.write(to: file, atomically: true, encoding: .utf8)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["swiftc", "-typecheck", "-swift-version", "6"] + (topLevel ? [] : ["-parse-as-library"]) + [
                         "-I", modules.path,
                         "-Xcc", "-fmodule-map-file=\(root.path)/include/module.modulemap",
                         "-Xcc", "-I\(root.path)/include",
                         "-Xcc", "-fmodule-map-file=\(root.path)/Sources/CSwiftThreadsShims/include/module.modulemap",
                         "-module-cache-path", dir.appendingPathComponent("mcache").path,
                         file.path]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus == 0, String(decoding: data, as: UTF8.self))
}

@Suite("Blocking calls are noasync")
struct NoAsyncTests {
    @Test func everyBlockingCallIsRefusedInAsyncCode() throws {
        guard let (ok, output) = try typeCheck(probeSource(blockingCalls)) else {
            Issue.record("no SwiftPM build to type-check against")
            return
        }
        #expect(!ok)
        // Line n + 5 of the probe is blockingCalls[n]: each must have its
        // "unavailable from asynchronous contexts" error.
        for (index, call) in blockingCalls.enumerated() {
            let line = index + 5
            let refused = output.split(separator: "\n").contains {
                $0.contains("probe.swift:\(line):") && $0.contains("unavailable from asynchronous contexts")
            }
            #expect(refused, "not refused in async code: \(call)")
        }
    }

    @Test func theAsyncCounterpartsAreAccepted() throws {
        guard let (ok, output) = try typeCheck(probeSource(allowedCalls)) else {
            Issue.record("no SwiftPM build to type-check against")
            return
        }
        #expect(ok, "\(output)")
    }

    /// In top-level code (a script's main.swift) the compiler picks the
    /// synchronous overload of a name even under `await`: the suspending
    /// request has a name of its own, and the blocking forms used there
    /// under `await` are refused instead of silently blocking.
    @Test func topLevelCodeGetsTheSuspendingRequestOrAnError() throws {
        let header = "import SwiftThreads\nlet port = try RLMessagePort(remote: \"x\")\n"
        guard let (ok, output) = try typeCheck(
            header + "let reply = try await port.request(msgid: 1, data: [1], timeout: 1)\n", topLevel: true)
        else {
            Issue.record("no SwiftPM build to type-check against")
            return
        }
        #expect(ok, "\(output)")
        let blocking = [
            "let reply = try await port.sendRequest(msgid: 1, data: [1], timeout: 1)",
            "try await RLThread.sleep(for: .milliseconds(1))",
            "_ = try await port.request(msgid: 1, timeout: 1)\nRLThread.sleep(forTimeInterval: 0)",
            "try await RLWorkerThread().shutdownGracefully()\ntry RLWorkerThread().stop()",
            "_ = try await RLThread.current.joined()\n_ = try RLThread.current.join()",
        ]
        for line in blocking {
            guard let (ok, output) = try typeCheck(header + line + "\n", topLevel: true) else { return }
            #expect(!ok, "accepted at top level: \(line)")
            #expect(output.contains("unavailable from asynchronous contexts"), "\(output)")
        }
    }

    @Test func asyncSleepSuspendsWithoutBlockingAndIsCancellable() async throws {
        let start = RLTime.now
        try await RLThread.sleep(for: .milliseconds(20))
        #expect(RLTime.now - start >= 0.019)
        try await RLThread.sleep(until: RLTime.now - 10)      // in the past: at once
        let task = Task { try await RLThread.sleep(for: .seconds(600)) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        let late = Task { try await RLThread.sleep(until: RLTime.now + 600) }
        late.cancel()
        await #expect(throws: CancellationError.self) { try await late.value }
    }

    @Test func asyncSleepUntilANaNDateThrows() async {
        await #expect(throws: RLError.self) { try await RLThread.sleep(until: .nan) }
    }

    @Test func performWithoutWaitingFromAsyncCode() async throws {
        let worker = RLWorkerThread(name: "noasync-perform")
        try worker.start()
        defer { stopInDefer(worker) }
        let target = try #require(worker.thread)
        let ranOn = ThrShared<String?>(nil)
        try target.perform { ranOn.set(RLThread.current.name) }
        try RLThread.perform(on: target) {}
        #expect(await asyncEventually { ranOn.get == "noasync-perform" })
        // The misuse checks of the waiting form apply.
        #expect(thrCode { try target.perform(modes: []) {} } == .invalidArgument)
        #expect(thrCode { try RLThread.performOnMain(modes: []) {} } == .invalidArgument)
        let unstarted = RLThread {}
        #expect(thrCode { try unstarted.perform {} } == .invalidState)
    }
}
