// RLTaskExecutor.swift — a worker thread as a Swift concurrency
// `TaskExecutor`, beside its `SerialExecutor` (RLWorkerThread.swift): a
// task that prefers the worker runs its nonisolated code on the worker
// thread, the way swift-nio's event loops take task executor preference.

extension RLWorkerThread: TaskExecutor {
    /// The worker as a task executor: for
    /// `withTaskExecutorPreference(worker) { … }` and
    /// `Task(executorPreference: worker) { … }`.
    ///
    /// A task that prefers the worker runs its nonisolated code on the
    /// worker thread, in FIFO order with everything else handed to the
    /// worker (``async(_:)``, actor jobs); code isolated to an actor still
    /// runs on that actor's executor. As for actors, the worker must be
    /// running while such a task runs: a job that cannot be queued stops
    /// the process (see ``enqueue(_:)``).
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Runs a job handed to the worker, whether as an actor's serial
    /// executor or as a task's preferred executor, on the worker thread.
    func runJob(_ job: UnownedJob) {
        job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
    }
}
