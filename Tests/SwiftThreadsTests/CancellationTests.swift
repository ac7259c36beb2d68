import Testing
import SwiftThreads

// Cancellation of awaited performs (RLPerform.swift's AsyncPerformRequest):
// work not yet started never starts and the await throws CancellationError
// at once; work that started finishes and its result is returned.

/// The three awaited performs, aimed at one running worker.
enum CXTarget: CaseIterable, Sendable {
    case threadRun, runLoopPerformAndWait, workerRun

    func perform<T: Sendable>(on worker: RLWorkerThread,
                              _ body: @escaping @Sendable () throws -> T) async throws -> T {
        switch self {
        case .threadRun: return try await worker.thread!.run(body)
        case .runLoopPerformAndWait: return try await worker.runLoop!.performAndWait(body)
        case .workerRun: return try await worker.run(body)
        }
    }
}

/// How an awaited perform ended.
enum CXOutcome: Equatable, Sendable {
    case value(Int), cancelled, other(String)
}

func cxOutcome(_ body: () async throws -> Int) async -> CXOutcome {
    do {
        return .value(try await body())
    } catch is CancellationError {
        return .cancelled
    } catch {
        return .other("\(error)")
    }
}

/// Runs `body` with a run loop on a thread of its own, which is stopped and
/// joined after.
func withLoopThread<R>(_ body: (RLRunLoop) async throws -> R) async rethrows -> R {
    let (thread, loop) = startLoopThread()
    defer {
        loop.stop()
        thread.join()
    }
    return try await body(loop)
}

/// Iterates in a task of its own (`iterate` counts what comes in the
/// counter it is given), runs `then` once the task is made, waits until
/// `arrived` holds for the count, then cancels the task: the iteration must
/// end, without an error, in the cancelled task.
func expectIterationEndsOnCancellation(
    _ iterate: sending @escaping (RLAtomicInt32) async throws -> Void,
    then: () throws -> Void = {},
    arrived: (Int32) -> Bool,
    sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    let seen = RLAtomicInt32(0)
    let task = Task { () throws -> Bool in
        try await iterate(seen)
        return Task.isCancelled
    }
    try then()
    #expect(await asyncEventually { arrived(seen.load()) }, sourceLocation: sourceLocation)
    task.cancel()
    #expect(try await task.value, sourceLocation: sourceLocation)
}

@Suite("Cancelling awaited performs")
struct CancellationTests {
    @Test(arguments: CXTarget.allCases)
    func cancelledWhileQueuedThrowsAtOnceAndNeverRuns(_ target: CXTarget) async throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let gate = ThrGate()
        let busy = ThrShared(false)
        try worker.async {
            busy.set(true)
            gate.wait()
        }
        #expect(await asyncEventually { busy.get })
        let ran = ThrShared(false)
        let outcome = ThrShared<CXOutcome?>(nil)
        let task = Task {
            let result = await cxOutcome { try await target.perform(on: worker) { ran.set(true); return 1 } }
            outcome.set(result)
        }
        // Let the request reach the worker's queue, then cancel: the await
        // ends while the worker is still busy.
        try await Task.sleep(for: .milliseconds(20))
        task.cancel()
        let endedWhileBusy = await asyncEventually { outcome.get != nil }
        gate.open()
        await task.value
        #expect(endedWhileBusy)
        #expect(outcome.get == .cancelled)
        // The queued request finds the request claimed: the work never runs.
        try await worker.run {}
        try await Task.sleep(for: .milliseconds(20))
        try await worker.run {}
        #expect(!ran.get)
    }

    @Test(arguments: CXTarget.allCases)
    func cancelledBeforeTheCallNeverQueuesTheWork(_ target: CXTarget) async throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let ran = ThrShared(false)
        let released = ThrShared(false)
        let outcome = await Task {
            withUnsafeCurrentTask { $0?.cancel() }
            let canary = ThrCanary { released.set(true) }
            return await cxOutcome {
                try await target.perform(on: worker) {
                    withExtendedLifetime(canary) {}
                    ran.set(true)
                    return 1
                }
            }
        }.value
        #expect(outcome == .cancelled)
        try await worker.run {}
        #expect(!ran.get)
        // The closure (and what it captured) is released, not kept queued.
        #expect(await asyncEventually { released.get })
    }

    @Test(arguments: CXTarget.allCases)
    func workThatStartedFinishesAndItsResultIsReturned(_ target: CXTarget) async throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let gate = ThrGate()
        let started = ThrShared(false)
        let task = Task {
            await cxOutcome {
                try await target.perform(on: worker) { () -> Int in
                    started.set(true)
                    gate.wait()
                    return 42
                }
            }
        }
        #expect(await asyncEventually { started.get })
        task.cancel()
        gate.open()
        #expect(await task.value == .value(42))
    }

    @Test(arguments: CXTarget.allCases)
    func anErrorOfWorkThatStartedIsRethrown(_ target: CXTarget) async throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let gate = ThrGate()
        let started = ThrShared(false)
        let task = Task { () -> Result<Int, ThrTestError> in
            do {
                return .success(try await target.perform(on: worker) { () throws -> Int in
                    started.set(true)
                    gate.wait()
                    throw ThrTestError(tag: 7)
                })
            } catch let error as ThrTestError {
                return .failure(error)
            } catch {
                return .failure(ThrTestError(tag: -1))
            }
        }
        #expect(await asyncEventually { started.get })
        task.cancel()
        gate.open()
        #expect(await task.value == .failure(ThrTestError(tag: 7)))
    }

    @Test func aStoppedTargetStillFailsWithItsError() async throws {
        let worker = RLWorkerThread()
        // Not running: the worker's run fails at once, cancelled or not.
        let outcome = await Task { () -> CXOutcome in
            await cxOutcome { try await worker.run { 1 } }
        }.value
        guard case .other = outcome else {
            Issue.record("expected the worker's error, got \(outcome)")
            return
        }
    }

    @Test func manyCancellationsRaceWithTheirWorkWithoutLossOrDoubleResume() async throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let runs = ThrShared(0)
        var tasks: [Task<CXOutcome, Never>] = []
        for i in 0..<300 {
            let task = Task { await cxOutcome { try await worker.run { runs.withLock { $0 += 1 }; return i } } }
            tasks.append(task)
            if i % 2 == 0 { task.cancel() }
        }
        var values = 0
        for (i, task) in tasks.enumerated() {
            switch await task.value {
            case .value(let v): #expect(v == i); values += 1
            case .cancelled: #expect(i % 2 == 0)
            case .other(let message): Issue.record("unexpected \(message)")
            }
        }
        try await worker.run {}
        // A body ran if and only if its value was returned.
        #expect(runs.get == values)
    }
}

/// Every async sequence of the overlay ends when the iterating task is
/// cancelled (RLSignals and RLStream.chunks have theirs in SignalTests and
/// StreamSequenceTests).
@Suite("Cancelling async sequences")
struct SequenceCancellationTests {
    @Test func portMessagesEndOnCancellation() async throws {
        let port = RLPort()
        let messages = port.messages
        let (thread, loop) = startLoopThreadWith { loop in loop.add(port, forMode: .default) }
        defer {
            port.invalidate()
            loop.stop()
            thread.join()
        }
        try await expectIterationEndsOnCancellation({ seen in
            for await _ in messages { seen.add(1) }
        }, then: {
            try port.send([.bytes([1])], msgid: 1, before: RLTime.now + 30)
        }, arrived: { $0 == 1 })
        #expect(port.isValid)   // the port itself goes on
    }

    @Test func streamEventsEndOnCancellation() async throws {
        try await withLoopThread { loop in
            let (input, output) = try RLStream.boundStreams(bufferSize: 64)
            output.open()
            let events = input.events(on: loop)
            input.open()
            try await expectIterationEndsOnCancellation({ seen in
                for await _ in events { seen.add(1) }
            }, arrived: { $0 >= 1 })   // openCompleted
            output.close()
        }
    }

    @Test func streamBytesEndOnCancellation() async throws {
        try await withLoopThread { loop in
            let (input, output) = try RLStream.boundStreams(bufferSize: 64)
            output.open()
            let side = HandOver(input)
            // Ends with nil (no error), the stream still open.
            try await expectIterationEndsOnCancellation({ seen in
                for try await _ in side.value.bytes(on: loop) { seen.add(1) }
            }, then: {
                _ = output.write([7], maxLength: 1)
            }, arrived: { $0 == 1 })
            output.close()
        }
    }

    @Test func aSequenceIteratedByAnAlreadyCancelledTaskEndsAtOnce() async throws {
        let port = RLPort()
        defer { port.invalidate() }
        let messages = port.messages
        let (input, _) = try RLStream.boundStreams(bufferSize: 64)
        let side = HandOver(input)
        let counts = await withLoopThread { loop in await Task { () -> [Int] in
            withUnsafeCurrentTask { $0?.cancel() }
            var a = 0, b = 0
            for await _ in messages { a += 1 }
            do {
                for try await _ in side.value.bytes(on: loop) { b += 1 }
            } catch {
                b = -1
            }
            return [a, b]
        }.value }
        #expect(counts == [0, 0])
    }
}
