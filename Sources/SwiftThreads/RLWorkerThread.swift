internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// A thread with a run loop that starts and stops synchronously
/// (`RLWorkerThreadRef`): the start/stop pattern of the "Controlling How
/// NSThread and NSRunLoop Exit" post, built in. Foundation has no
/// counterpart.
///
/// - ``start()`` returns once the worker's run loop is running and ready.
/// - ``async(_:)``, ``sync(_:)`` and ``run(_:)`` hand work to it; work runs
///   FIFO on the worker thread, in its run loop's common modes. (Requests
///   made to its thread or run loop through ``RLThread`` or ``RLRunLoop``
///   are not ordered with these.)
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
    /// The FIFO of ``async(_:)`` work and actor jobs.
    private let queue = RLWorkerQueue()

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
    /// worker's own FIFO, which the worker drains in batches: one run-loop
    /// request per batch, not per closure (see `RLWorkerQueue`). It runs in
    /// the order it was queued, and before any ``sync(_:)`` or ``run(_:)``
    /// work queued after it. Requests made to the worker's thread or run
    /// loop through ``RLThread`` or ``RLRunLoop`` are another queue, not
    /// ordered with this one.
    ///
    /// - Throws: `RLError` `.invalidState` if the worker is not running
    ///   (nothing is queued; the closure is released unrun).
    public func async(_ block: @escaping @Sendable () -> Void) throws(RLError) {
        try queue.add(block, to: ref)
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

/// The FIFO of one worker's fire-and-forget work (``RLWorkerThread/async(_:)``
/// and actor jobs), drained on the worker in batches.
///
/// Why: handing each closure to the C library as its own request costs a
/// block copy (Swift copies an escaping closure to the heap before the C
/// call, so the C side cannot use its copy-free path for stack blocks), a
/// free on the worker, and the worker's and the thread's checks, locks and
/// reference counts, per closure. Here a closure costs an append under a
/// mutex; only the first closure of a batch makes a C request (a *drain*,
/// in the worker's common modes, which also wakes the loop), and the drain
/// runs every closure queued until it starts. This is how swift-nio's
/// event loop takes `execute` work.
///
/// The protocol, all under `mutex`: `posted` is true while exactly one
/// drain request is queued in the C library and has not started. The
/// first `add` of a batch sets it and then makes the request; later adds
/// only append. A drain that starts takes every pending closure and clears
/// `posted`; a drain that is dropped unrun (the worker stopped or its
/// thread exited first) or refused drops every pending closure (releases
/// them unrun) and clears `posted`. So every appended closure belongs to
/// the one outstanding drain, which either runs it or drops it.
///
/// FIFO with ``RLWorkerThread/sync(_:)`` and ``RLWorkerThread/run(_:)``
/// (which go to the C queue directly): a closure appended before such a
/// request was made has its drain in the C queue already, ahead of it.
final class RLWorkerQueue: @unchecked Sendable {
    typealias Work = @Sendable () -> Void

    // The fields are reached under the mutex or from the worker thread
    // only (see each); Swift's run-time exclusivity checks on them would
    // cost as much as the rest of a hand-over, and are off.
    private let mutex = ThreadsMutex()
    /// Under `mutex`: closures queued for the next drain.
    @exclusivity(unchecked) private var pending = RLWorkBuffer()
    /// Under `mutex`: a drain request is queued and has not started.
    @exclusivity(unchecked) private var posted = false

    /// The worker thread only: the batch being run; `inFlight.next` is the
    /// next to run. A drain run by a nested run of the loop (from inside a
    /// closure of the batch) goes on from there, so the batch still runs in
    /// order, before what was queued later.
    @exclusivity(unchecked) private var inFlight = RLWorkBuffer()

    deinit {
        pending.dispose()
        inFlight.dispose()
    }

    /// Appends `work`; makes the drain request if none is outstanding.
    func add(_ work: @escaping Work, to worker: RLWorkerThreadRef) throws(RLError) {
        mutex.lock()
        pending.append(work)
        let mustPost = !posted
        posted = true
        mutex.unlock()
        guard mustPost else { return }
        let ticket = RLWorkerDrainTicket(queue: self)
        let info = Unmanaged.passRetained(ticket).toOpaque()
        let ok = RLWorkerThreadPerformAsyncWithRelease(worker, rlWorkerDrainRun, info, rlWorkerDrainRelease)
        ticket.posting = false
        guard ok else {
            // The release callback took the pending closures (ours among
            // them) into the ticket without releasing them: releasing runs
            // deinits, which could overwrite the C error read here.
            let error = RLError.last()
            ticket.refused.removeAll()
            throw error
        }
    }

    /// The drain request ran: runs every pending closure, in order.
    fileprivate func drain() {
        mutex.lock()
        if inFlight.isDone {
            inFlight.reset()
            swap(&inFlight, &pending)
        } else {
            // A nested drain: after what the outer batch has left.
            inFlight.takeAll(from: &pending)
        }
        posted = false
        mutex.unlock()
        while let work = inFlight.takeNext() {
            work()
        }
        inFlight.reset()
    }

    /// The outstanding drain request will not run: takes what it would
    /// have run (the caller releases it, outside the mutex).
    fileprivate func takePending() -> [Work] {
        mutex.lock()
        posted = false
        let taken = pending.takeRest()
        mutex.unlock()
        return taken
    }

    /// The worker thread is exiting from inside a closure of a batch
    /// (``RLThread/exit()``): takes the rest of the batch, unrun.
    fileprivate func takeRestOfBatch() -> [Work] {
        let rest = inFlight.takeRest()
        inFlight.reset()
        return rest
    }
}

/// A FIFO of closures in one buffer: appended at `count`, taken (moved
/// out, no reference counting) at `next`. Not thread-safe; a value type
/// only so that two can be swapped in O(1) — the owner calls ``dispose()``.
struct RLWorkBuffer {
    /// A closure as the buffer stores it. In a struct, because a function
    /// type stored as a generic pointee is kept in its most general form,
    /// and converting to and from it allocates a thunk each way.
    private struct Item {
        let work: RLWorkerQueue.Work
    }

    private var base: UnsafeMutablePointer<Item>?
    private var capacity = 0
    private var count = 0
    private(set) var next = 0

    /// Capacity kept for the next batch once this one is done; above it
    /// (after a backlog) the memory goes back to malloc.
    private static let keptCapacity = 1024

    /// Every closure was taken.
    var isDone: Bool { next == count }

    mutating func append(_ work: @escaping RLWorkerQueue.Work) {
        if count == capacity { grow(to: max(64, capacity * 2)) }
        (base! + count).initialize(to: Item(work: work))
        count += 1
    }

    /// The next closure, moved out; nil when all were taken.
    mutating func takeNext() -> RLWorkerQueue.Work? {
        guard next < count else { return nil }
        let item = (base! + next).move()
        next += 1
        return item.work
    }

    /// Moves every untaken closure of `other` to the end of this one.
    mutating func takeAll(from other: inout RLWorkBuffer) {
        while let work = other.takeNext() { append(work) }
        other.reset()
    }

    /// The untaken closures, moved out into an array.
    mutating func takeRest() -> [RLWorkerQueue.Work] {
        var rest: [RLWorkerQueue.Work] = []
        rest.reserveCapacity(count - next)
        while let work = takeNext() { rest.append(work) }
        reset()
        return rest
    }

    /// Empties a buffer whose closures were all taken.
    mutating func reset() {
        precondition(next == count, "RLWorkBuffer.reset with closures left")
        next = 0
        count = 0
        if capacity > Self.keptCapacity {
            base?.deallocate()
            base = nil
            capacity = 0
        }
    }

    /// Releases the untaken closures and the memory.
    mutating func dispose() {
        if let base {
            (base + next).deinitialize(count: count - next)
            base.deallocate()
        }
        base = nil
        capacity = 0
        count = 0
        next = 0
    }

    private mutating func grow(to newCapacity: Int) {
        let newBase = UnsafeMutablePointer<Item>.allocate(capacity: newCapacity)
        if let base {
            // The taken ones are gone already: keep only the rest.
            (newBase).moveInitialize(from: base + next, count: count - next)
            base.deallocate()
        }
        count -= next
        next = 0
        base = newBase
        capacity = newCapacity
    }
}

/// One drain request of an `RLWorkerQueue`, the C request's info.
///
/// The drain reaches the ticket and the queue without retaining them
/// (`_withUnsafeGuaranteedRef`): a closure may end the thread
/// (``RLThread/exit()``), and what a Swift frame retained is then never
/// released — the queue, its buffers and the ticket would leak. The C
/// request holds the ticket (passed retained, released by the release
/// callback), and the ticket holds the queue.
private final class RLWorkerDrainTicket: @unchecked Sendable {
    let queue: Unmanaged<RLWorkerQueue>
    /// Set by the drain, on the worker, before it runs anything.
    var ran = false
    /// True while the poster is inside the C call; read by the release
    /// callback only on the poster's own thread.
    var posting = true
    let poster = pthread_self()
    /// What a refused request would have run, left for the poster.
    var refused: [RLWorkerQueue.Work] = []

    init(queue: RLWorkerQueue) { self.queue = Unmanaged.passRetained(queue) }

    deinit { queue.release() }
}

private let rlWorkerDrainRun: @convention(c) (UnsafeMutableRawPointer?) -> Void = { info in
    Unmanaged<RLWorkerDrainTicket>.fromOpaque(info!)._withUnsafeGuaranteedRef { ticket in
        ticket.ran = true
        ticket.queue._withUnsafeGuaranteedRef { $0.drain() }
    }
}

/// Called once per drain request: after it ran, when it is dropped unrun,
/// or (on the poster's thread, inside the C call) when it is refused.
private let rlWorkerDrainRelease: @convention(c) (UnsafeMutableRawPointer?) -> Void = { info in
    let ticket = Unmanaged<RLWorkerDrainTicket>.fromOpaque(info!).takeRetainedValue()
    if !ticket.ran {
        let unrun = ticket.queue.takeUnretainedValue().takePending()
        if pthread_equal(ticket.poster, pthread_self()) != 0 && ticket.posting {
            ticket.refused = unrun
        }
        // Otherwise `unrun` is released here, unrun, outside the mutex.
    } else {
        // After a drain that returned, its batch is empty; what is left
        // means the thread is exiting from inside a closure.
        _ = ticket.queue.takeUnretainedValue().takeRestOfBatch()
    }
}
