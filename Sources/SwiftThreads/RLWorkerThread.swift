internal import CRunLoop

/// A thread with a run loop that starts and stops synchronously
/// (`RLWorkerThreadRef`): the start/stop pattern of the "Controlling How
/// NSThread and NSRunLoop Exit" post, built in. Foundation has no
/// counterpart.
///
/// - ``start()`` returns once the worker's run loop is running and ready.
/// - ``async(_:)``, ``sync(_:)`` and ``run(_:)`` hand work to it; work runs
///   FIFO on the worker thread, in its run loop's common modes. It goes into
///   the run loop's one perform queue, so requests made from one thread to
///   the worker, its ``thread`` (`RLThread.perform(modes:_:)`) or its
///   ``runLoop`` (`RLRunLoop.perform(_:)`) run in the order they were made.
/// - ``stop()`` returns once the thread has fully exited — its run loop torn
///   down, its will-exit handlers run, the thread joined. Work queued before
///   ``stop()`` runs first.
/// - An idle worker sleeps in the kernel: no polling.
/// - A stopped worker can be started again (on a new thread).
///
/// The worker is also a `SerialExecutor`: an actor whose `unownedExecutor`
/// is ``asUnownedSerialExecutor()`` runs all its methods on the worker
/// thread (see ``enqueue(_:)``); and a `TaskExecutor`
/// (``asUnownedTaskExecutor()``): `withTaskExecutorPreference(worker)` and
/// `Task(executorPreference: worker)` run a task's nonisolated code there.
///
/// The object is `Sendable`; every member may be used from any thread,
/// except that ``stop()`` (and ``sync(_:)`` of work that stops it) cannot be
/// called on the worker itself. Dropping the last reference stops a running
/// worker; when that happens on the worker thread itself, the thread is told
/// to stop and exits by itself once the current work returns (detached, not
/// joined).
public final class RLWorkerThread: @unchecked Sendable {
    /// The one C reference this wrapper owns.
    let ref: RLWorkerThreadRef

    /// Identifies a handler of ``addWillExitHandler(_:)`` for
    /// ``removeWillExitHandler(_:)``.
    public struct HandlerToken: Hashable, Sendable {
        let raw: UInt64
    }

    /// A stopped worker whose threads will carry `name`.
    public init(name: String? = nil) {
        let created: RLWorkerThreadRef?
        if let name {
            created = name.withCString { RLWorkerThreadCreate(nil, $0) }
        } else {
            created = RLWorkerThreadCreate(nil, nil)
        }
        guard let created else { fatalError("RLWorkerThread: \(RLError.last())") }
        ref = created
    }

    deinit {
        // Stops (and joins) a running worker; on the worker thread itself —
        // where the last reference is easily dropped, by a closure that
        // captured the worker — the C library lets the thread stop and exit
        // on its own instead.
        _ = RLRelease(UnsafeRawPointer(ref))
    }

    // MARK: Lifecycle

    /// Starts the worker; returns once its run loop is running.
    ///
    /// - Throws: `RLError` `.invalidState` if it is running (or being started
    ///   or stopped); a system error if no thread could be made.
    public func start() throws(RLError) {
        guard RLWorkerThreadStart(ref) else { throw RLError.last() }
    }

    /// Stops the worker; returns once its thread has exited (after its
    /// will-exit handlers) and was joined. Queued work runs first.
    ///
    /// Blocks the calling thread: in async code use
    /// ``shutdownGracefully()``.
    ///
    /// - Throws: `RLError` `.invalidState` if it is not running;
    ///   `.wouldDeadlock` on the worker thread itself.
    @available(*, noasync, message: "blocks until the worker's thread has exited; use try await shutdownGracefully()")
    public func stop() throws(RLError) {
        guard RLWorkerThreadStop(ref) else { throw RLError.last() }
    }

    /// True between ``start()`` and ``stop()``, or until work on the worker
    /// ended its thread with ``RLThread/exit()``.
    public var isRunning: Bool { RLWorkerThreadIsRunning(ref) }

    /// The running worker's thread, or nil when stopped. The wrapper stays
    /// valid after a concurrent ``stop()`` (the thread then reads as
    /// finished): it comes from `RLWorkerThreadCopyThread`.
    public var thread: RLThread? {
        guard let thread = RLWorkerThreadCopyThread(ref) else { return nil }
        defer { RLRelease(UnsafeRawPointer(thread)) }
        return RLThread.wrapper(for: thread)
    }

    /// The running worker's run loop, or nil when stopped. Add timers and
    /// sources to it from any thread (`RLWorkerThreadCopyRunLoop`).
    public var runLoop: RLRunLoop? {
        guard let loop = RLWorkerThreadCopyRunLoop(ref) else { return nil }
        defer { RLRelease(UnsafeRawPointer(loop)) }
        return RLRunLoop.wrapper(for: loop)
    }

    /// True when called on the running worker's thread.
    public var isCurrent: Bool {
        guard let worker = RLWorkerThreadCopyThread(ref) else { return false }
        defer { RLRelease(UnsafeRawPointer(worker)) }
        return RLThreadGetCurrent() == worker
    }

    /// Registers `handler` as a will-exit handler of every thread the
    /// worker runs from now on (and of the current one, if running): it runs
    /// on the worker thread during ``stop()``, after the run loop was torn
    /// down, before ``stop()`` returns (`RLWorkerThreadAddWillExitHandlerBlock`).
    ///
    /// - Returns: a token for ``removeWillExitHandler(_:)``.
    @discardableResult
    public func addWillExitHandler(_ handler: @escaping @Sendable (RLThread) -> Void) throws(RLError) -> HandlerToken {
        let token = RLWorkerThreadAddWillExitHandlerBlock(ref) { thread in
            if let thread { handler(RLThread.wrapper(for: thread)) }
        }
        guard token != 0 else { throw RLError.last() }
        return HandlerToken(raw: token)
    }

    /// Removes a handler, for future threads and the running one (a handler
    /// already running or run is not undone).
    ///
    /// - Throws: `RLError` `.notFound` for an unknown token.
    public func removeWillExitHandler(_ token: HandlerToken) throws(RLError) {
        guard RLWorkerThreadRemoveWillExitHandler(ref, token.raw) else { throw RLError.last() }
    }

    // MARK: Work

    /// Queues `block` on the worker and returns.
    ///
    /// Work queued here (and actor jobs, ``enqueue(_:)``) goes into the
    /// worker run loop's one perform queue (`RLWorkerThreadPerformBlockAsync`),
    /// with the requests made through ``sync(_:)``, ``run(_:)``, its thread
    /// (`RLThread.perform(modes:_:)`) and its run loop
    /// (`RLRunLoop.perform(_:)`): what one thread queues runs in the order
    /// it was queued, whichever of these queued it.
    ///
    /// - Throws: `RLError` `.invalidState` if the worker is not running
    ///   (nothing is queued; the closure is released unrun).
    public func async(_ block: @escaping @Sendable () -> Void) throws(RLError) {
        guard RLWorkerThreadPerformBlockAsync(ref, block) else { throw RLError.last() }
    }

    /// Runs `body` on the worker and returns its value (or rethrows its
    /// error) after it ran; on the worker itself it runs at once. Like
    /// `DispatchQueue.sync`, `body` need not escape: the C library releases
    /// its copy of the work before it lets this call return, ran or dropped.
    ///
    /// - Throws: the body's error; `RLError` `.invalidState` if the worker is
    ///   not running or stops before running it.
    @discardableResult
    @available(*, noasync, message: "blocks until the work ran; use try await run(_:)")
    public func sync<T>(_ body: () throws -> T) throws -> T {
        let outcome = SyncOutcome<T>()
        let ran = withoutActuallyEscaping(body) { body in
            RLWorkerThreadPerformBlockSync(ref) { outcome.result = Result { try body() } }
        }
        guard ran else { throw RLError.last() }
        // The block's writes happen-before the C call's return (its waiter
        // is released under the thread's lock).
        guard let result = outcome.result else {
            throw RLError(code: .invalidState, message: "RLWorkerThread.sync: the work did not run")
        }
        return try result.get()
    }

    /// Runs `body` on the worker and suspends until it has run, returning its
    /// value or rethrowing its error; no thread blocks while waiting.
    ///
    /// - Throws: the body's error; `RLError` `.invalidState` if the worker is
    ///   not running.
    @discardableResult
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await AsyncPerformRequest.outcome(of: body) { request in
            do {
                try self.async { request.run() }
            } catch {
                request.fail(error)
            }
        }
    }
}

// MARK: - Actor executor

extension RLWorkerThread: SerialExecutor {
    /// Runs `job` on the worker thread, in FIFO order with all other work
    /// handed to the worker.
    ///
    /// The worker must be running while an actor uses it: a job that cannot
    /// be queued (the worker is stopped) stops the process, because dropping
    /// it would leave its task suspended forever and running it elsewhere
    /// would break the actor's isolation.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        do {
            try self.async { self.runJob(job) }
        } catch {
            fatalError("RLWorkerThread: an actor job was enqueued on a worker that is not running (\(error))")
        }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Traps unless called on the worker thread (`assumeIsolated` support).
    public func checkIsolated() {
        precondition(isCurrent, "RLWorkerThread: not on the worker thread")
    }
}

// MARK: - Support

/// The result slot of one ``RLWorkerThread/sync(_:)``: written on the
/// worker, read by the caller after the C call returned.
private final class SyncOutcome<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
