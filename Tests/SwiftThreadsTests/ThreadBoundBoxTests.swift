import Testing
import SwiftThreads

/// Deliberately not Sendable: what RLThreadBoundBox exists to carry.
private final class Ledger {
    var entries: [Int] = []
}

@Suite("RLThreadBoundBox")
struct ThreadBoundBoxTests {
    @Test func everyHolderSeesTheOneValue() {
        let box = RLThreadBoundBox(1)
        let other = box                       // the same box, not a copy
        other.value += 1
        #expect(box.value == 2)
        box.withValue { $0 *= 10 }
        #expect(other.value == 20)
        #expect(box.thread == RLThread.current)
        #expect(box.isOnOwningThread)
    }

    @Test func performChangesTheValueInPlaceOnTheOwningThread() async throws {
        let worker = RLWorkerThread(name: "box-owner")
        try worker.start()
        defer { stopInDefer(worker) }
        let thread = try #require(worker.thread)
        // Made here, bound to the worker: the ledger is handed over.
        let box = RLThreadBoundBox(Ledger(), thread: thread)
        #expect(!box.isOnOwningThread)
        for i in 0..<100 { try box.perform { $0.entries.append(i) } }
        let (entries, onOwner) = try await box.run { ($0.entries, RLThread.current == thread) }
        #expect(entries == Array(0..<100))
        #expect(onOwner)
        // A value type changed in place by perform.
        let counter = RLThreadBoundBox(0, thread: thread)
        for _ in 0..<50 { try counter.perform { $0 += 1 } }
        #expect(try await counter.run { $0 } == 50)
    }

    @Test func anEmptyBoxIsFilledOnItsThread() async throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let thread = try #require(worker.thread)
        let box = RLThreadBoundBox.makeEmptyBox(of: Ledger.self, thread: thread)
        try box.perform { $0 = Ledger() }
        try box.perform { $0?.entries.append(7) }
        #expect(try await box.run { $0?.entries } == [7])
    }

    @Test func performToAFinishedThreadThrowsAndNeverRuns() async throws {
        let worker = RLWorkerThread()
        try worker.start()
        let thread = try #require(worker.thread)
        let box = RLThreadBoundBox(0, thread: thread)
        try await worker.shutdownGracefully()
        let ran = ThrShared(false)
        #expect(thrCode { try box.perform { _ in ran.set(true) } } == .invalidState)
        #expect(thrCode { try box.perform(modes: []) { _ in ran.set(true) } } != nil)
        await #expect(throws: RLError.self) { try await box.run { _ in ran.set(true) } }
        #expect(!ran.get)
    }

    @Test func aCancelledRunNeverTouchesTheValue() async throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let box = RLThreadBoundBox(0, thread: try #require(worker.thread))
        let outcome = await Task { () -> Bool in
            withUnsafeCurrentTask { $0?.cancel() }
            do {
                try await box.run { $0 += 1 }
                return false
            } catch {
                return error is CancellationError
            }
        }.value
        #expect(outcome)
        #expect(try await box.run { $0 } == 0)
    }

    @Test func theValueOnAnotherThreadStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let box = RLThreadBoundBox(Ledger())
            let reader = RLThread(returning: { box.value.entries.count })
            try reader.start()
            _ = try await reader.joined()
        }
        await #expect(processExitsWith: .failure) {
            let box = RLThreadBoundBox(0)
            let writer = RLThread(returning: { box.withValue { $0 += 1 } })
            try writer.start()
            _ = try await writer.joined()
        }
    }
}
