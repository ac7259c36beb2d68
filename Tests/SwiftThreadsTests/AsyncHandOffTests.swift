// AsyncHandOffTests.swift — objects made on a loop or worker thread and
// handed to an awaiting task: the task reads them whole, and, under
// `swift test --sanitize=thread` (make check-swift-tsan), with no race
// reported. The concurrency runtime's resume is invisible to
// ThreadSanitizer, so these reported the task's reads as racing with the
// other thread's writes (in about one run of ten) until the hand-off told it
// (SwiftThreadsShims.h). Each round is awaited as it is made, so that the
// resume meets the task just as it suspends.
import Testing
@testable import SwiftThreads

/// Made and filled on the thread that runs the work; read by the task.
private final class Made: @unchecked Sendable {
    var round: Int
    var parts: [String] = []
    var thread: String?

    init(round: Int) { self.round = round }

    static func fill(_ round: Int) -> Made {
        let made = Made(round: round)
        for i in 0..<3 { made.parts.append("\(round).\(i)") }
        made.thread = RLThread.current.name
        return made
    }

    func isWhole(round: Int, thread: String) -> Bool {
        self.round == round && parts == (0..<3).map { "\(round).\($0)" } && self.thread == thread
    }
}

@Suite("Hand-offs to awaiting tasks")
struct AsyncHandOffTests {
    static let rounds = 300

    @Test func objectsMadeByRunLoopPerformAndWaitAreWhole() async throws {
        let (thread, loop) = startLoopThreadWith { _ in RLThread.current.name = "handoff-loop" }
        var whole = 0
        for round in 0..<Self.rounds {
            let made = try await loop.performAndWait { Made.fill(round) }
            if made.isWhole(round: round, thread: "handoff-loop") { whole += 1 }
        }
        #expect(whole == Self.rounds)
        loop.stop()
        thread.join()
    }

    @Test func objectsMadeByThreadRunAreWhole() async throws {
        let worker = RLWorkerThread(name: "handoff-thread")
        try worker.start()
        defer { stopInDefer(worker) }
        let target = try #require(worker.thread)
        var whole = 0
        for round in 0..<Self.rounds {
            let made = try await target.run { Made.fill(round) }
            if made.isWhole(round: round, thread: "handoff-thread") { whole += 1 }
        }
        #expect(whole == Self.rounds)
    }

    @Test func objectsMadeByWorkerRunAreWhole() async throws {
        let worker = RLWorkerThread(name: "handoff-worker")
        try worker.start()
        defer { stopInDefer(worker) }
        var whole = 0
        for round in 0..<Self.rounds {
            let made = try await worker.run { Made.fill(round) }
            if made.isWhole(round: round, thread: "handoff-worker") { whole += 1 }
        }
        #expect(whole == Self.rounds)
    }

    /// An error made on the loop thread reaches the task whole too.
    @Test func errorsMadeOnTheLoopAreWhole() async throws {
        final class Failure: Error, @unchecked Sendable {
            var detail: [Int] = []
        }
        let (thread, loop) = startLoopThread()
        var whole = 0
        for round in 0..<Self.rounds {
            do {
                try await loop.performAndWait { () throws -> Int in
                    let failure = Failure()
                    failure.detail = [round, round + 1]
                    throw failure
                }
            } catch let failure as Failure {
                if failure.detail == [round, round + 1] { whole += 1 }
            }
        }
        #expect(whole == Self.rounds)
        loop.stop()
        thread.join()
    }
}
