import Testing
import SwiftThreads

/// One queue per thread: closures handed to a worker from one thread run in
/// the order they were handed over, whichever front end took them
/// (``RLWorkerThread/async(_:)``, ``RLThread/perform(modes:_:)``,
/// ``RLRunLoop/perform(_:)``, ``RLWorkerThread/sync(_:)``).
@Suite("Perform order")
struct PerformOrderTests {
    @Test func workerAsyncThreadAndRunLoopPerformsRunInSubmissionOrder() throws {
        let worker = RLWorkerThread(name: "perform-order")
        try worker.start()
        defer { try? worker.stop() }
        let thread = try #require(worker.thread)
        let loop = try #require(worker.runLoop)
        let seen = ThrWorkerOnly<[Int]>([])
        let count = 3_000
        for i in 0..<count {
            switch i % 4 {
            case 0: try worker.async { seen.value.append(i) }
            case 1: try thread.perform { seen.value.append(i) }
            case 2: #expect(loop.perform { seen.value.append(i) })
            default: try worker.async { seen.value.append(i) }
            }
            if i % 500 == 499 {
                // A waiting request takes its turn too.
                try worker.sync { seen.value.append(-1) }
            }
        }
        let order = try worker.sync { seen.value }
        let ran = order.filter { $0 != -1 }
        // The first request that ran out of its turn, if any.
        let firstOutOfTurn = zip(ran, 0...).first { $0.0 != $0.1 }.map { "\($0.0) ran as number \($0.1)" }
        #expect(firstOutOfTurn == nil)
        #expect(ran.count == count)
        #expect(order.count == count + count / 500)
    }

    @Test func asyncFromInsideWorkKeepsItsPlaceBehindEarlierRequests() throws {
        // Work running on the worker queues more: it runs after everything
        // queued before it, by any front end.
        let worker = RLWorkerThread(name: "perform-order-nested")
        try worker.start()
        defer { try? worker.stop() }
        let thread = try #require(worker.thread)
        let seen = ThrWorkerOnly<[String]>([])
        try worker.sync {
            try? worker.async { seen.value.append("a") }
            try? thread.perform { seen.value.append("p") }
            try? worker.async { seen.value.append("b") }
        }
        try worker.sync { seen.value.append("s") }
        #expect(try worker.sync { seen.value } == ["a", "p", "b", "s"])
    }
}
