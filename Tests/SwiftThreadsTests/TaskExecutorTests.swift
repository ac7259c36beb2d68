import Testing
import SwiftThreads

// A worker thread as a task executor (RLTaskExecutor.swift): tasks that
// prefer it run their nonisolated code on the worker thread.

/// Where nonisolated async code runs: the task's preferred executor.
nonisolated func teWhereAmI(_ worker: RLWorkerThread) async -> Bool {
    await Task.yield()
    return worker.isCurrent
}

/// An actor on the default executor (not the worker).
actor TEPlainActor {
    func onWorker(_ worker: RLWorkerThread) -> Bool { worker.isCurrent }
}

@Suite("RLWorkerThread as a TaskExecutor")
struct TaskExecutorTests {
    @Test func taskWithPreferenceRunsOnTheWorker() async throws {
        let worker = RLWorkerThread(name: "task-executor")
        try worker.start()
        defer { stopInDefer(worker) }
        let seen = await Task(executorPreference: worker) { () -> [String?] in
            var names = [RLThread.current.name]
            await Task.yield()
            names.append(RLThread.current.name)
            names.append(await teWhereAmI(worker) ? "worker" : "elsewhere")
            return names
        }.value
        #expect(seen == ["task-executor", "task-executor", "worker"])
    }

    @Test func withTaskExecutorPreferenceRunsTheBodyOnTheWorker() async throws {
        let worker = RLWorkerThread(name: "preferred")
        try worker.start()
        defer { stopInDefer(worker) }
        #expect(!worker.isCurrent)
        let (direct, nested) = await withTaskExecutorPreference(worker) {
            (worker.isCurrent, await teWhereAmI(worker))
        }
        #expect(direct)
        #expect(nested)
        // A child task inherits the preference.
        let child = await withTaskExecutorPreference(worker) {
            await withTaskGroup(of: Bool.self) { group in
                group.addTask { worker.isCurrent }
                return await group.next() ?? false
            }
        }
        #expect(child)
        // Without the preference, the default executor again.
        #expect(!(await teWhereAmI(worker)))
    }

    @Test func anActorWithItsOwnExecutorKeepsItDefaultActorsFollowThePreference() async throws {
        let worker = RLWorkerThread()
        let other = RLWorkerThread()
        try worker.start()
        try other.start()
        defer {
            stopInDefer(worker)
            stopInDefer(other)
        }
        let plain = TEPlainActor()
        let bound = ThrWorkerBoundCounter(worker: other)
        let (inPlain, inBound, after) = await Task(executorPreference: worker) {
            let inPlain = await plain.onWorker(worker)
            let inBound = await bound.increment()
            return (inPlain, inBound, worker.isCurrent)
        }.value
        #expect(inPlain)    // SE-0417: a default actor runs on the preferred executor
        #expect(inBound)    // an actor with its own executor runs there (the other worker)
        #expect(after)      // and back on the worker for nonisolated code
    }

    @Test func jobsRunInFIFOOrderWithTheWorkersOtherWork() async throws {
        let worker = RLWorkerThread()
        try worker.start()
        defer { stopInDefer(worker) }
        let order = await Task(executorPreference: worker) { () -> [String] in
            let order = ThrShared<[String]>([])
            for i in 0..<20 {
                // Queued behind this job; the task's next job (after the
                // yield) is queued behind it.
                try? worker.async { order.withLock { $0.append("a\(i)") } }
                await Task.yield()
                order.withLock { $0.append("t\(i)") }
            }
            return order.get
        }.value
        #expect(order == (0..<20).flatMap { ["a\($0)", "t\($0)"] })
    }

    @Test func theTaskReleasesTheExecutorWhenItEnds() async throws {
        weak var weakWorker: RLWorkerThread?
        let thread: RLThread
        do {
            let worker = RLWorkerThread(name: "released")
            try worker.start()
            weakWorker = worker
            thread = try #require(worker.thread)
            await Task(executorPreference: worker) { await Task.yield() }.value
            await withTaskExecutorPreference(worker) { await Task.yield() }
        }
        // Nothing of the task (nor of the preference scope) keeps the
        // worker: it goes, and its thread stops.
        #expect(await asyncEventually { weakWorker == nil })
        #expect(await asyncEventually { thread.isFinished })
    }

    @Test func aJobForAStoppedWorkerStopsTheProcess() async {
        await #expect(processExitsWith: .failure) {
            let worker = RLWorkerThread()
            await Task(executorPreference: worker) {}.value
        }
    }
}
