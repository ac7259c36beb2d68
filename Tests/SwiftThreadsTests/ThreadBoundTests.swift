import Testing
import SwiftThreads

/// Deliberately not Sendable: what RLThreadBound exists to carry.
private final class Tally {
    var count = 0
    var threads: [RLThread] = []
}

@Suite("RLThreadBound")
struct ThreadBoundTests {
    @Test func valueIsReadAndWrittenOnItsThread() {
        var bound = RLThreadBound(41)
        #expect(bound.thread == RLThread.current)
        #expect(bound.isOnOwningThread)
        bound.value += 1
        #expect(bound.value == 42)
    }

    @Test func performRunsWithTheValueOnTheOwningThreadInOrder() throws {
        let worker = RLWorkerThread(name: "bound-owner")
        try worker.start()
        defer { try? worker.stop() }
        // Made on the worker: the tally belongs to the worker thread.
        let bound = try worker.sync { RLThreadBound(Tally()) }
        #expect(bound.thread == worker.thread)
        #expect(!bound.isOnOwningThread)

        // From this thread and from two others, which only carry the box.
        for i in 0..<100 { try bound.perform { $0.count += 1; if i == 0 { $0.threads.append(.current) } } }
        let helpers = try (0..<2).map { _ in
            try thrStartJoinable {
                for _ in 0..<100 { try bound.perform { $0.count += 1 } }
            }
        }
        for helper in helpers { try helper.join() }

        let (count, threads) = try worker.sync { (bound.value.count, bound.value.threads) }
        #expect(count == 300)
        #expect(threads == [try #require(worker.thread)])
    }

    @Test func performToAFinishedThreadThrowsAndReleasesTheBodyUnrun() throws {
        let worker = RLWorkerThread()
        try worker.start()
        let bound = try worker.sync { RLThreadBound(Tally()) }
        try worker.stop()

        let ran = ThrShared(false)
        let released = ThrGate()
        do {
            let sentinel = ReleaseSentinel(released)
            #expect(thrCode {
                try bound.perform { _ in withExtendedLifetime(sentinel) { ran.set(true) } }
            } == .invalidState)
        }
        // The closure (and the sentinel it held) was released, unrun.
        #expect(released.wait())
        #expect(!ran.get)
    }

    @Test func emptyModeListIsRefused() throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { try? worker.stop() }
        let bound = try worker.sync { RLThreadBound(0) }
        #expect(thrCode { try bound.perform(modes: []) { _ in } } == .invalidArgument)
    }

    @Test func valueOnAnotherThreadStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let bound = RLThreadBound(Tally())
            let reader = RLThread(returning: { bound.value.count })
            try reader.start()
            _ = try await reader.joined()
        }
        await #expect(processExitsWith: .failure) {
            let bound = RLThreadBound(Tally())
            let writer = RLThread(returning: { () -> Int in
                var copy = bound
                copy.value = Tally()
                return 0
            })
            try writer.start()
            _ = try await writer.joined()
        }
    }
}

/// Opens its gate when released.
private final class ReleaseSentinel: Sendable {
    let gate: ThrGate
    init(_ gate: ThrGate) { self.gate = gate }
    deinit { gate.open() }
}
