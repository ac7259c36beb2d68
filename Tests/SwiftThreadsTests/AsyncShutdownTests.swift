import Testing
@testable import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The async forms of the calls that wait for a thread's end:
// RLWorkerThread.shutdownGracefully() (stop()) and RLThread.joined()
// (join()). Waits are bounded only to keep a broken build from hanging.

/// The RLError code an async body threw (nil: it succeeded).
private func asyncCode(_ body: () async throws -> Void) async -> RLError.Code? {
    do {
        try await body()
        return nil
    } catch let error as RLError {
        return error.code
    } catch {
        Issue.record("not an RLError: \(error)")
        return nil
    }
}

@Suite("Async shutdown and join")
struct AsyncShutdownTests {
    @Test func shutdownGracefullyRunsQueuedWorkThenEndsTheThread() async throws {
        let worker = RLWorkerThread(name: "graceful")
        try worker.start()
        let thread = try #require(worker.thread)
        let exited = ThrShared(false)
        _ = try worker.addWillExitHandler { _ in exited.set(true) }
        let ran = ThrShared<[Int]>([])
        for i in 0..<100 { try worker.async { ran.withLock { $0.append(i) } } }
        try await worker.shutdownGracefully()
        #expect(ran.get == Array(0..<100))
        #expect(exited.get)
        #expect(!worker.isRunning)
        #expect(thread.isFinished)
        // A stopped worker starts again, and shuts down again.
        try worker.start()
        #expect(try await worker.run { worker.isCurrent })
        try await worker.shutdownGracefully()
        #expect(!worker.isRunning)
    }

    /// The wait does not hold the caller's thread: a task on a worker's
    /// only thread awaits another worker's shutdown, whose last queued work
    /// needs the first worker's thread to run something. Blocking there
    /// (as stop() does) would keep that from running.
    @Test func shutdownGracefullyDoesNotBlockTheCallersExecutor() async throws {
        let caller = RLWorkerThread(name: "caller")
        let target = RLWorkerThread(name: "target")
        try caller.start()
        try target.start()
        defer { stopInDefer(caller) }
        let callerRan = ThrShared(false)
        try target.async {
            // The caller's thread is awaiting the shutdown by now, or soon.
            usleep(50_000)
            try? caller.async { callerRan.set(true) }
            for _ in 0..<3_000 where !callerRan.get { usleep(10_000) }
        }
        let onCaller = try await withTaskExecutorPreference(caller) { () async throws -> Bool in
            let here = caller.isCurrent
            try await target.shutdownGracefully()
            return here
        }
        #expect(onCaller)
        #expect(callerRan.get)
        #expect(!target.isRunning)
    }

    @Test func shutdownGracefullyMisuseThrows() async throws {
        let worker = RLWorkerThread()
        // Never started.
        #expect(await asyncCode { try await worker.shutdownGracefully() } == .invalidState)
        try worker.start()
        // On the worker itself: refused, and the worker keeps running.
        let own = await withTaskExecutorPreference(worker) { () async -> RLError.Code? in
            await asyncCode { try await worker.shutdownGracefully() }
        }
        #expect(own == .wouldDeadlock)
        #expect(worker.isRunning)
        #expect(try await worker.run { 7 } == 7)
        // Two at once: one stops it, the other finds it stopping or stopped.
        async let first = asyncCode { try await worker.shutdownGracefully() }
        async let second = asyncCode { try await worker.shutdownGracefully() }
        let codes = await [first, second]
        #expect(codes.filter { $0 == nil }.count == 1)
        #expect(codes.filter { $0 == .invalidState }.count == 1)
        // Already stopped.
        #expect(await asyncCode { try await worker.shutdownGracefully() } == .invalidState)
    }

    @Test func joinedReturnsTheBodysResultOrError() async throws {
        let answer = try thrStartJoinable { 42 }
        #expect(try await answer.joined() as? Int == 42)
        #expect(answer.isFinished)
        let typed = try thrStartJoinable { "text" }
        #expect(try await typed.joined(as: String.self) == "text")
        let failing = RLThread(returning: { () throws -> Int in throw ThrTestError(tag: 3) })
        let reported = ThrShared<(any Error)?>(nil)
        failing.errorHandler = { error in reported.set(error) }
        try failing.start()
        await #expect(throws: ThrTestError(tag: 3)) { try await failing.joined() }
        #expect(reported.get as? ThrTestError == ThrTestError(tag: 3))
        let exited = try thrStartJoinable { () -> Int in RLThread.exit() }
        #expect(try await exited.joined() == nil)
    }

    @Test func joinedMisuseThrows() async throws {
        // Already joined.
        let once = try thrStartJoinable { 1 }
        try await once.joined()
        #expect(await asyncCode { try await once.joined() } == .invalidState)
        // The wrong type.
        let number = try thrStartJoinable { 5 }
        #expect(await asyncCode { _ = try await number.joined(as: String.self) } == .invalidArgument)
        // Unstarted, detached, main.
        let unstarted = RLThread(returning: { 1 })
        #expect(await asyncCode { try await unstarted.joined() } == .invalidState)
        let detached = RLThread {}
        try detached.start()
        #expect(await asyncCode { try await detached.joined() } == .invalidState)
        #expect(await asyncCode { try await RLThread.main.joined() } == .invalidState)
        // The calling thread itself.
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let own = await withTaskExecutorPreference(worker) { () async -> RLError.Code? in
            await asyncCode { try await RLThread.current.joined() }
        }
        #expect(own == .wouldDeadlock)
    }
}
