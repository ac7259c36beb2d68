import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A started, joinable thread that runs its run loop in `mode` (kept alive by
/// a timer that never fires) until `done` is set.
func thrLoopThread(mode: RLRunLoop.Mode, done: ThrShared<Bool>, ready: ThrGate) throws -> RLThread {
    let thread = RLThread {
        let loop = RLRunLoop.current
        let keepAlive = RLTimer(fire: RLTime.distantFuture, interval: 0, repeats: false) { _ in }
        loop.add(keepAlive, forMode: mode)
        ready.open()
        while !done.get { _ = try? loop.run(mode: mode, for: 0.005) }
        keepAlive.invalidate()
    }
    try thread.setJoinable(true)
    try thread.start()
    ready.wait()
    return thread
}

@Suite("RLThread perform requests")
struct PerformTests {
    @Test func performWaitUntilDoneRunsOnTarget() throws {
        let worker = RLWorkerThread(name: "perform-target")
        try worker.start()
        defer { try? worker.stop() }
        let target = try #require(worker.thread)
        let ranOn = ThrShared<RLThread?>(nil)
        try RLThread.perform(on: target, waitUntilDone: true) { ranOn.set(RLThread.current) }
        #expect(ranOn.get == target)
        #expect(ranOn.get?.name == "perform-target")
    }

    @Test func requestsRunInOrder() throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { try? worker.stop() }
        let target = try #require(worker.thread)
        let order = ThrShared<[Int]>([])
        for i in 0..<2_000 {
            try target.perform { order.withLock { $0.append(i) } }
        }
        try target.perform(waitUntilDone: true) {}
        #expect(order.get == Array(0..<2_000))
    }

    @Test func waitUntilDoneOnSelfRunsAtOnce() throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { try? worker.stop() }
        let inline = try worker.sync { () -> Bool in
            let ran = ThrShared(false)
            try? RLThread.current.perform(waitUntilDone: true) { ran.set(true) }
            return ran.get
        }
        #expect(inline)
    }

    @Test func misuseFailsWithoutHanging() throws {
        let unstarted = RLThread {}
        #expect(thrCode { try unstarted.perform {} } == .invalidState)

        let finished = try thrStartJoinable {}
        try finished.join()
        #expect(thrCode { try finished.perform {} } == .invalidState)
        #expect(thrCode { try finished.perform(waitUntilDone: true) {} } == .invalidState)

        let worker = RLWorkerThread()
        try worker.start()
        defer { try? worker.stop() }
        let target = try #require(worker.thread)
        #expect(thrCode { try target.perform(modes: []) {} } == .invalidArgument)
        #expect(thrCode { try RLThread.performOnMain(modes: []) {} } == .invalidArgument)
    }

    @Test func waitingOnAThreadThatNeverRunsItsLoopFails() throws {
        let ran = ThrShared(false)
        // The target finishes without ever running its run loop.
        let target = try thrStartJoinable { RLThread.sleep(forTimeInterval: 0.05) }
        let code = thrCode { try target.perform(waitUntilDone: true) { ran.set(true) } }
        #expect(code == .invalidState)
        try target.join()
        #expect(!ran.get)
    }

    @Test func droppedRequestsReleaseTheirClosures() throws {
        let dropped = ThrShared(false)
        let gate = ThrGate()
        let target = try thrStartJoinable { gate.wait() }
        do {
            let canary = ThrCanary { dropped.set(true) }
            try target.perform { _ = canary }
        }
        gate.open()
        try target.join()
        #expect(thrEventually { dropped.get })
    }

    @Test func requestsRunOnlyInTheirModes() throws {
        let custom = RLRunLoop.Mode("thr.custom")
        let done = ThrShared(false)
        let target = try thrLoopThread(mode: custom, done: done, ready: ThrGate())
        let log = ThrLog()
        try target.perform(modes: [.default]) { log.add("default") }
        try target.perform(modes: [custom], waitUntilDone: true) { log.add("custom") }
        try target.perform(modes: [.common]) { log.add("common") }
        try target.perform(modes: [custom, .default], waitUntilDone: true) { log.add("both") }
        done.set(true)
        try target.join()
        // "common" did not run: thr.custom is not a common mode.
        #expect(log.all == ["custom", "both"])
    }

    @Test func performOnMainQueues() throws {
        // The test runner's main thread does not run its run loop, so only
        // queuing is checked here (the demo exercises the full path).
        try RLThread.performOnMain {}
    }

    @Test func performAfterDelayAndCancellation() throws {
        let log = ThrLog()
        let codes = ThrShared<[RLError.Code?]>([])
        let counts = ThrShared<[Int]>([])
        let thread = RLThread {
            try RLThread.perform(after: 0.002) { log.add("a") }
            let b = try RLThread.perform(after: 0.002) { log.add("b") }
            let cancelledB = b.cancel()
            let cancelledAgain = b.cancel()
            counts.withLock { $0 += [cancelledB ? 1 : 0, cancelledAgain ? 1 : 0] }
            try RLThread.perform(after: 0.002, tag: "tag") { log.add("c1") }
            try RLThread.perform(after: .milliseconds(2), tag: "tag") { log.add("c2") }
            try RLThread.perform(after: 0.001, tag: 99) { log.add("d") }
            counts.withLock { $0.append(RLThread.cancelPreviousPerformRequests(tag: "tag")) }
            try RLThread.perform(after: -5, modes: [RLRunLoop.Mode("thr.other")]) { log.add("other mode") }
            codes.withLock {
                $0.append(thrCode { try RLThread.perform(after: .nan) {} })
                $0.append(thrCode { try RLThread.perform(after: 1, modes: []) {} })
            }
            try RLThread.perform(after: 0.02) { log.add("last") }
            // Returns once the default mode has no timers left.
            RLRunLoop.current.run()
            counts.withLock { $0.append(RLThread.cancelPreviousPerformRequests(tag: 99)) }
        }
        try thread.setJoinable(true)
        try thread.start()
        try thread.join()
        #expect(thread.error == nil)
        #expect(log.all.count == 3)
        #expect(Set(log.all) == ["a", "d", "last"])
        #expect(counts.get == [1, 0, 2, 0])
        #expect(codes.get == [.invalidArgument, .invalidArgument])
    }

    @Test func asyncRunReturnsTheValue() async throws {
        let worker = RLWorkerThread(name: "async-run")
        try worker.start()
        defer { stopInDefer(worker) }
        let target = try #require(worker.thread)
        let name = try await target.run { RLThread.current.name }
        #expect(name == "async-run")
        let onTarget = try await target.run { RLThread.current == target }
        #expect(onTarget)
        await #expect(throws: ThrTestError(tag: 3)) {
            try await target.run { () -> Int in throw ThrTestError(tag: 3) }
        }
    }

    @Test func asyncRunOnFinishedThreadThrows() async throws {
        let finished = try thrStartJoinable {}
        try await finished.joined()
        await #expect(throws: RLError.self) { try await finished.run { 1 } }

        // Started, but it finishes without running its loop: resumed with an
        // error instead of hanging.
        let target = try thrStartJoinable { RLThread.sleep(forTimeInterval: 0.02) }
        do {
            _ = try await target.run { 1 }
            Issue.record("the work ran on a thread that never ran its loop")
        } catch let error as RLError {
            #expect(error.code == .invalidState)
        }
        try await target.joined()
    }
}
