internal import CRunLoop

/// A thread with a run loop that starts and stops synchronously
/// (`RLWorkerThreadRef`): the start/stop pattern of the "Controlling How
/// NSThread and NSRunLoop Exit" post, built in. Foundation has no
/// counterpart.
///
/// - ``start()`` returns once the worker's run loop is running and ready.
/// - ``async(_:)``, ``sync(_:)`` and ``run(_:)`` hand work to it; work runs
///   FIFO on the worker thread, in its run loop's common modes.
/// - ``stop()`` returns once the thread has fully exited — its run loop torn
///   down, its will-exit handlers run, the thread joined. Work queued before
///   ``stop()`` runs first.
/// - An idle worker sleeps in the kernel: no polling.
/// - A stopped worker can be started again (on a new thread).
///
/// The worker is also a `SerialExecutor`: an actor whose `unownedExecutor`
/// is ``asUnownedSerialExecutor()`` runs all its methods on the worker
/// thread (see ``enqueue(_:)``).
///
/// The object is `Sendable`; every member may be used from any thread,
/// except that ``stop()`` (and ``sync(_:)`` of work that stops it) cannot be
/// called on the worker itself. Dropping the last reference stops a running
/// worker, also when that happens on the worker thread (the stop is then
/// handed to a short-lived helper thread).
public final class RLWorkerThread: @unchecked Sendable {
    /// The one C reference this wrapper owns.
    let ref: RLWorkerThreadRef
    /// Will-exit handlers, owned here: the C worker keeps only their
    /// pointers, for as long as it lives — which is no longer than this
    /// wrapper (deinit releases it).
    private let exitHandlers = ThreadsMutexProtected<[WorkerExitHandlerBox]>([])

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
        // Releasing a running worker stops (joins) it, which the C library
        // refuses on the worker thread itself — where the last reference is
        // easily dropped (a closure that captured the worker, released after
        // it ran). Then a helper thread does the release.
        if RLRelease(UnsafeRawPointer(ref)) { return }
        let handoff = WorkerHandoff(ref: ref, handlers: exitHandlers)
        let ok = RLThreadDetachNewWithBlock {
            // Keeps the exit handlers alive until the worker is gone.
            withExtendedLifetime(handoff) { _ = RLRelease(UnsafeRawPointer(handoff.ref)) }
        }
        if !ok {
            rlWriteStandardError("SwiftThreads: RLWorkerThread: could not stop a worker released on its own thread: \(RLError.last())\n")
        }
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
    /// - Throws: `RLError` `.invalidState` if it is not running;
    ///   `.wouldDeadlock` on the worker thread itself.
    public func stop() throws(RLError) {
        guard RLWorkerThreadStop(ref) else { throw RLError.last() }
    }

    /// True between ``start()`` and ``stop()``.
    public var isRunning: Bool { RLWorkerThreadIsRunning(ref) }

    /// The running worker's thread, or nil when stopped.
    public var thread: RLThread? {
        guard let thread = RLWorkerThreadGetThread(ref) else { return nil }
        return RLThread.wrapper(for: thread)
    }

    /// The running worker's run loop, or nil when stopped. Add timers and
    /// sources to it from any thread.
    public var runLoop: RLRunLoop? {
        guard let loop = RLWorkerThreadGetRunLoop(ref) else { return nil }
        return RLRunLoop.wrapper(for: loop)
    }

    /// True when called on the running worker's thread.
    public var isCurrent: Bool {
        guard let worker = RLWorkerThreadGetThread(ref) else { return false }
        return RLThreadGetCurrent() == worker
    }

    /// Registers `handler` as a will-exit handler of every thread the
    /// worker runs from now on (and of the current one, if running): it runs
    /// on the worker thread during ``stop()``, after the run loop was torn
    /// down, before ``stop()`` returns. Handlers cannot be removed; they live
    /// as long as the worker.
    public func addWillExitHandler(_ handler: @escaping @Sendable (RLThread) -> Void) throws(RLError) {
        let box = WorkerExitHandlerBox(handler)
        let added = exitHandlers.withLock { handlers in
            // Kept before the C call so that a handler never runs unowned.
            handlers.append(box)
            let info = Unmanaged.passUnretained(box).toOpaque()
            if RLWorkerThreadAddWillExitHandler(ref, rlWorkerExitCallout, info) { return true }
            handlers.removeLast()
            return false
        }
        guard added else { throw RLError.last() }
    }

    // MARK: Work

    /// Queues `block` on the worker and returns.
    ///
    /// - Throws: `RLError` `.invalidState` if the worker is not running
    ///   (nothing is queued).
    public func async(_ block: @escaping @Sendable () -> Void) throws(RLError) {
        guard RLWorkerThreadPerformBlockAsync(ref, block) else { throw RLError.last() }
    }

    /// Runs `body` on the worker and returns its value (or rethrows its
    /// error) after it ran; on the worker itself it runs at once.
    ///
    /// - Throws: the body's error; `RLError` `.invalidState` if the worker is
    ///   not running or stops before running it.
    public func sync<T>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let outcome = SyncOutcome<T>()
        let ran = RLWorkerThreadPerformBlockSync(ref) { outcome.result = Result { try body() } }
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
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let request = AsyncPerformRequest(continuation: continuation, body: body)
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
    /// Runs `job` on the worker thread, in FIFO order with all other work.
    ///
    /// The worker must be running while an actor uses it: a job that cannot
    /// be queued (the worker is stopped) stops the process, because dropping
    /// it would leave its task suspended forever and running it elsewhere
    /// would break the actor's isolation.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        do {
            try self.async { job.runSynchronously(on: executor) }
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

private final class WorkerExitHandlerBox: Sendable {
    let handler: @Sendable (RLThread) -> Void
    init(_ handler: @escaping @Sendable (RLThread) -> Void) { self.handler = handler }
}

private func rlWorkerExitCallout(_ thread: RLThreadRef?, _ info: UnsafeMutableRawPointer?) {
    guard let thread, let info else { return }
    Unmanaged<WorkerExitHandlerBox>.fromOpaque(info).takeUnretainedValue().handler(RLThread.wrapper(for: thread))
}

/// What a `deinit` on the worker thread hands to the helper thread.
private final class WorkerHandoff: @unchecked Sendable {
    let ref: RLWorkerThreadRef
    let handlers: ThreadsMutexProtected<[WorkerExitHandlerBox]>
    init(ref: RLWorkerThreadRef, handlers: ThreadsMutexProtected<[WorkerExitHandlerBox]>) {
        self.ref = ref
        self.handlers = handlers
    }
}

/// The result slot of one ``RLWorkerThread/sync(_:)``: written on the
/// worker, read by the caller after the C call returned.
private final class SyncOutcome<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
