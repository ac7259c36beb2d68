internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// A thread of the process: Foundation's `Thread` over the C `RLThreadRef`.
///
/// Create a thread with a closure, configure it (``setStackSize(_:)``,
/// ``name``, ``setPriority(_:)``, ``setJoinable(_:)``), then ``start()`` it.
/// ``detachNewThread(_:)`` does both in one call. Every thread — one made
/// here, the main thread, one made by C code or by plain pthreads — has an
/// `RLThread`: ``current`` and ``main`` return it.
///
/// Differences from Foundation on Linux, on purpose:
/// - ``name`` read from another thread is that thread's name, kept in full
///   (the kernel's copy, what `ps` shows, is cut to 15 bytes);
/// - ``setPriority(_:)`` has a real effect (the thread's nice value; see the
///   C header `RLThread.h` for the mapping);
/// - will-exit handlers (``addWillExitHandler(_:)``) run on the exiting
///   thread after its run loop was torn down, while it still exists;
/// - an error thrown by the body is not lost: ``join()`` rethrows it,
///   ``error`` keeps it, and ``errorHandler`` (or, without one, standard
///   error) is told at once;
/// - a joinable thread (``setJoinable(_:)``) can be waited for with
///   ``join()``, which returns the body's result.
///
/// The object is `Sendable`: every member may be used from any thread (the
/// C functions behind it are thread-safe). While a wrapper of a thread is
/// alive, ``current`` on that thread returns the same object (`===`); `==`
/// compares the underlying C threads.
///
/// Mapping from Foundation: `Thread` → `RLThread`, `Thread.current` →
/// ``current``, `Thread.main` → ``main``, `threadDictionary` → the
/// subscript ``subscript(_:)``, `stackSize` → ``stackSize`` /
/// ``setStackSize(_:)``, `threadPriority` → ``priority`` /
/// ``setPriority(_:)``, `qualityOfService` → ``qualityOfService`` (a nice
/// value: ``RLQualityOfService``), `Thread.sleep(forTimeInterval:)` →
/// ``sleep(forTimeInterval:)``, `NSThreadWillExitNotification` →
/// ``addWillExitHandler(_:)``, `NSWillBecomeMultiThreadedNotification` →
/// ``addWillBecomeMultiThreadedHandler(_:)``, `performSelector…` → the
/// `perform` family (RLPerform.swift).
public final class RLThread: @unchecked Sendable {
    /// The one C reference this wrapper owns (see `wrapper(for:)`).
    private let reference: OwnedRef
    var ref: RLThreadRef { reference.pointer }
    /// The Swift side of a thread created from Swift (its body, result and
    /// error); nil for threads made elsewhere (main, C, plain pthreads).
    private let state: ThreadState?

    private init(retaining ref: RLThreadRef, state: ThreadState?) {
        reference = OwnedRef(retaining: ref)
        self.state = state
    }

    deinit { RLThread.registry.forget(RLThread.key(ref)) }

    // MARK: Creating

    /// An unstarted, detached thread that will run `block`
    /// (`RLThreadCreateWithBlock`; Foundation's `Thread(block:)`).
    ///
    /// If `block` throws, the error is reported: kept in ``error``, passed
    /// to ``errorHandler`` (printed on standard error when there is none),
    /// and rethrown by ``join()``.
    public convenience init(block: @escaping @Sendable () throws -> Void) {
        self.init(body: block, joinable: false)
    }

    /// An unstarted, joinable thread whose body returns a value for
    /// ``join()`` (``setJoinable(_:)`` with `false` before ``start()``
    /// detaches it; an unjoined joinable thread does not leak).
    ///
    /// A bare trailing closure, `RLThread { … }`, stays Foundation's
    /// detached `Thread(block:)`: this form is chosen only by its label.
    @_disfavoredOverload
    public convenience init<Result: Sendable>(returning body: @escaping @Sendable () throws -> Result) {
        self.init(body: body, joinable: true)
    }

    private init<Result: Sendable>(body: @escaping @Sendable () throws -> Result, joinable: Bool) {
        let state = ThreadState(body: { try body() })
        // The block captures only the state (never this wrapper: the C
        // thread owns the block, and the wrapper owns the C thread).
        guard let created = RLThreadCreateWithBlock(nil, { state.run() }) else {
            fatalError("RLThread: \(RLError.last())")
        }
        // An unstarted thread of our own: making it joinable cannot fail.
        if joinable && !RLThreadSetJoinable(created, true) {
            fatalError("RLThread: \(RLError.last())")
        }
        reference = OwnedRef(adopting: created)
        self.state = state
        state.registryKey = RLThread.key(created)
        RLThread.registry.record(RLThread.key(created), wrapper: self, companion: state)
    }

    /// Starts the thread (`RLThreadStart`). A thread cancelled before this
    /// call never runs its body: it is finished at once.
    ///
    /// - Throws: `RLError` `.invalidState` if it was started already (or is
    ///   not a thread created by `init`), a system error if no thread could
    ///   be made (the thread stays unstarted).
    public func start() throws(RLError) {
        guard RLThreadStart(ref) else { throw RLError.last() }
    }

    /// Creates and starts a detached thread running `block`
    /// (`Thread.detachNewThread(_:)`). An error it throws is reported as for
    /// `init(block:)`.
    public static func detachNewThread(_ block: @escaping @Sendable () throws -> Void) throws(RLError) {
        try RLThread(block: block).start()
    }

    // MARK: Which thread

    /// The calling thread (`RLThreadGetCurrent`). A thread not created by
    /// the library gets its `RLThread` on first use.
    public static var current: RLThread {
        guard let ref = RLThreadGetCurrent() else { fatalError("RLThread.current: \(RLError.last())") }
        return wrapper(for: ref)
    }

    /// The main thread (`RLThreadGetMain`), from any thread.
    public static var main: RLThread {
        guard let ref = RLThreadGetMain() else { fatalError("RLThread.main: \(RLError.last())") }
        return wrapper(for: ref)
    }

    /// True on the main thread (`RLThreadIsMainThread`).
    public static var isMainThread: Bool { RLThreadIsMainThread() }

    /// True if this is the main thread (`RLThreadIsMain`).
    public var isMainThread: Bool { RLThreadIsMain(ref) }

    /// True once a thread was started through the library
    /// (`RLThreadIsMultiThreaded`; Foundation's `Thread.isMultiThreaded()`).
    public static var isMultiThreaded: Bool { RLThreadIsMultiThreaded() }

    /// Registers `handler` to run once, on the thread that makes the first
    /// successful ``start()`` of the process, just before that thread is
    /// created (`NSWillBecomeMultiThreadedNotification`).
    ///
    /// - Throws: `RLError` `.invalidState` if the process is already
    ///   multi-threaded (the handler will never run).
    public static func addWillBecomeMultiThreadedHandler(_ handler: @escaping @Sendable () -> Void) throws(RLError) {
        // The C library copies the block and releases it after it ran.
        guard RLThreadAddWillBecomeMultiThreadedHandlerBlock(handler) else { throw RLError.last() }
    }

    // MARK: Attributes

    /// The stack size in bytes: the configured size (512 KB by default) for
    /// a thread created here, the actual size for the main and foreign
    /// threads (`RLThreadGetStackSize`).
    public var stackSize: Int { Int(RLThreadGetStackSize(ref)) }

    /// The smallest stack size ``setStackSize(_:)`` accepts (16 KB).
    public static let minimumStackSize = 16 * 1024
    /// Stack sizes must be a multiple of this (4 KB).
    public static let stackSizeGranule = 4 * 1024

    /// Sets the stack size before ``start()`` (`RLThreadSetStackSize`).
    ///
    /// - Throws: `RLError` `.invalidArgument` for less than 16 KB or not a
    ///   multiple of 4 KB; `.invalidState` once the thread was started.
    public func setStackSize(_ bytes: Int) throws(RLError) {
        guard bytes >= 0 else {
            throw RLError(code: .invalidArgument, message: "RLThread.setStackSize: negative size \(bytes)")
        }
        guard RLThreadSetStackSize(ref, bytes) else { throw RLError.last() }
    }

    /// The thread's name, in full ("" reads as nil). Settable before and
    /// after start, from any thread; reading returns this thread's name
    /// whichever thread reads it. The main thread and threads this module
    /// did not start read the kernel's name (at most 15 bytes) until a name
    /// is set here, as Foundation's `Thread.name` does. Use
    /// ``setName(_:)`` to see failures.
    public var name: String? {
        get {
            guard let cString = RLThreadCopyName(ref) else { return nil }
            defer { free(cString) }
            let name = String(cString: cString)
            return name.isEmpty ? nil : name
        }
        set { try? setName(newValue) }
    }

    /// Sets (or, with nil, clears) the name (`RLThreadSetName`).
    public func setName(_ name: String?) throws(RLError) {
        let ok: Bool
        if let name {
            ok = name.withCString { RLThreadSetName(ref, $0) }
        } else {
            ok = RLThreadSetName(ref, nil)
        }
        guard ok else { throw RLError.last() }
    }

    /// Priority in 0.0…1.0; 0.5 is the default (`RLThreadGetPriority`).
    public var priority: Double { RLThreadGetPriority(ref) }

    /// Sets the priority, before or after start (`RLThreadSetPriority`):
    /// the thread's nice value, 19 at 0.0, 0 at 0.5, -20 at 1.0, clamped to
    /// what the system allows. The value read back is the value set.
    ///
    /// - Throws: `RLError` `.invalidArgument` for NaN or outside 0…1.
    public func setPriority(_ priority: Double) throws(RLError) {
        guard RLThreadSetPriority(ref, priority) else { throw RLError.last() }
    }

    /// Whether ``join()`` may be used (false, detached, by default).
    public var isJoinable: Bool { RLThreadIsJoinable(ref) }

    /// Makes the thread joinable (or detached) before ``start()``
    /// (`RLThreadSetJoinable`). An unjoined joinable thread does not leak.
    ///
    /// - Throws: `RLError` `.invalidState` once started.
    public func setJoinable(_ joinable: Bool) throws(RLError) {
        guard RLThreadSetJoinable(ref, joinable) else { throw RLError.last() }
    }

    // MARK: Joining and errors

    /// Waits until a joinable thread has fully exited (its will-exit
    /// handlers included) and returns its body's result (`()` for a `Void`
    /// body), or nil if the body never returned: it was cancelled before
    /// start, or it called ``exit()`` (`RLThreadJoin`).
    ///
    /// Blocks the calling thread: in async code use ``joined()``.
    ///
    /// - Throws: the error the body threw; `RLError` `.wouldDeadlock` on the
    ///   thread itself, `.invalidState` for a detached, unstarted, main or
    ///   foreign thread, or one already joined.
    @discardableResult
    @available(*, noasync, message: "blocks until the thread has exited; use try await joined()")
    public func join() throws -> (any Sendable)? {
        guard RLThreadJoin(ref, nil) else { throw RLError.last() }
        switch state?.outcome {
        case .success(let value)?: return value
        case .failure(let error)?: throw error
        case nil: return nil
        }
    }

    /// ``join()``, with the result as `T`.
    ///
    /// - Throws: as ``join()``; `RLError` `.invalidArgument` if the body
    ///   returned something other than a `T`.
    @available(*, noasync, message: "blocks until the thread has exited; use try await joined(as:)")
    public func join<T: Sendable>(as type: T.Type) throws -> T? {
        guard let value = try join() else { return nil }
        guard let typed = value as? T else {
            throw RLError(code: .invalidArgument,
                          message: "RLThread.join(as:): the body returned \(Swift.type(of: value)), not \(T.self)")
        }
        return typed
    }

    /// The error the body threw, once it has; nil otherwise (and for
    /// threads not created from Swift).
    public var error: (any Error)? {
        if case .failure(let error)? = state?.outcome { return error }
        return nil
    }

    /// Called on the thread, with the error, when its body throws. Without a
    /// handler the error is printed on standard error. Settable from any
    /// thread; set it before ``start()`` to be sure it is seen. Threads not
    /// created from Swift ignore it.
    public var errorHandler: (@Sendable (any Error) -> Void)? {
        get { state?.errorHandler }
        set { state?.errorHandler = newValue }
    }

    // MARK: State and cancellation

    /// Sets the cancelled flag (`RLThreadCancel`). Cooperative: the body
    /// checks ``isCancelled``; a thread not yet started never runs its body.
    public func cancel() { RLThreadCancel(ref) }

    public var isCancelled: Bool { RLThreadIsCancelled(ref) }
    /// Started and not finished.
    public var isExecuting: Bool { RLThreadIsExecuting(ref) }
    /// Its exit sequence (run-loop teardown, will-exit handlers) is complete,
    /// or it was cancelled before start.
    public var isFinished: Bool { RLThreadIsFinished(ref) }

    /// Ends the calling thread now (`RLThreadExit`).
    ///
    /// Discouraged, as in Apple's guide: return from the body instead.
    /// Swift objects on the thread's stack are not released (they leak),
    /// and `defer` blocks do not run. The thread's run loop is still torn
    /// down and its will-exit handlers and dictionary values are still
    /// released; ``join()`` then returns nil.
    public static func exit() -> Never { RLThreadExit() }

    // MARK: Sleeping

    /// Sleeps the calling thread for `seconds` on the monotonic clock;
    /// signals do not cut it short; `<= 0` returns at once. NaN is ignored.
    @available(*, noasync, message: "blocks the thread; use try await Task.sleep(for:) (or RLThread.sleep(for:) async, in an async function)")
    public static func sleep(forTimeInterval seconds: RLTimeInterval) {
        RLThreadSleepForTimeInterval(seconds)
    }

    /// ``sleep(forTimeInterval:)`` with a `Duration`.
    @available(*, noasync, message: "blocks the thread; use try await Task.sleep(for:) (or RLThread.sleep(for:) async, in an async function)")
    public static func sleep(for duration: Duration) {
        RLThreadSleepForTimeInterval(duration.rlSeconds)
    }

    /// Sleeps the calling thread until `date` (seconds since 2001, the
    /// number `Date.timeIntervalSinceReferenceDate` holds).
    @available(*, noasync, message: "blocks the thread; use try await RLThread.sleep(until:) async in an async function, or Task.sleep")
    public static func sleep(until date: RLAbsoluteTime) {
        RLThreadSleepUntilDate(date)
    }

    // MARK: Will-exit handlers

    /// Identifies a will-exit handler for removal.
    public struct HandlerToken: Hashable, Sendable {
        let raw: UInt64
        /// The thread the handler belongs to (nil: every thread).
        let thread: RLThread?

        public static func == (lhs: Self, rhs: Self) -> Bool { lhs.raw == rhs.raw }
        public func hash(into hasher: inout Hasher) { hasher.combine(raw) }
    }

    /// Registers `handler` to run when this thread exits, on the exiting
    /// thread, after its body returned and its run loop was torn down, with
    /// the thread (`RLThreadAddWillExitHandlerBlock`). This thread's handlers
    /// run first, then those of ``addWillExitHandlerForAllThreads(_:)``,
    /// each in the order added.
    ///
    /// - Throws: `RLError` `.invalidState` if the thread has finished.
    @discardableResult
    public func addWillExitHandler(_ handler: @escaping @Sendable (RLThread) -> Void) throws(RLError) -> HandlerToken {
        let token = RLThreadAddWillExitHandlerBlock(ref) { thread in
            if let thread { handler(RLThread.wrapper(for: thread)) }
        }
        guard token != 0 else { throw RLError.last() }
        return HandlerToken(raw: token, thread: self)
    }

    /// Registers `handler` to run when any thread exits
    /// (`NSThreadWillExitNotification`).
    @discardableResult
    public static func addWillExitHandlerForAllThreads(_ handler: @escaping @Sendable (RLThread) -> Void)
        throws(RLError) -> HandlerToken {
        let token = RLThreadAddWillExitHandlerBlock(nil) { thread in
            if let thread { handler(RLThread.wrapper(for: thread)) }
        }
        guard token != 0 else { throw RLError.last() }
        return HandlerToken(raw: token, thread: nil)
    }

    /// Removes a handler added by ``addWillExitHandler(_:)`` or
    /// ``addWillExitHandlerForAllThreads(_:)``.
    ///
    /// - Throws: `RLError` `.notFound` if it is unknown or has run.
    public static func removeWillExitHandler(_ token: HandlerToken) throws(RLError) {
        guard RLThreadRemoveWillExitHandler(token.thread?.ref, token.raw) else { throw RLError.last() }
    }

    // MARK: Thread dictionary

    /// Per-thread values (Foundation's `threadDictionary`), readable and
    /// writable from any thread. Values are released when replaced, removed,
    /// or after the thread's will-exit handlers when it exits.
    ///
    /// Swift keys live in their own namespace inside the C thread
    /// dictionary (C code does not see them under the same name).
    public subscript(key: String) -> (any Sendable)? {
        get { value(forKey: key) }
        set {
            if let newValue { setValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// The value stored under `key`, or nil.
    public func value(forKey key: String) -> (any Sendable)? {
        // Copy rule: the C library keeps the entry alive until our retain
        // callback has taken a reference, even if another thread replaces
        // or removes the value meanwhile (RLThreadDictionaryCopyValue).
        var raw: UnsafeMutableRawPointer?
        let found = RLThread.swiftKey(key).withCString {
            RLThreadDictionaryCopyValue(ref, $0, rlThreadValueRetain, &raw)
        }
        guard found, let raw else { return nil }
        return Unmanaged<ThreadValueBox>.fromOpaque(raw).takeRetainedValue().value
    }

    /// ``value(forKey:)`` as a `T`; nil if absent or of another type.
    public func value<T: Sendable>(forKey key: String, as type: T.Type) -> T? {
        value(forKey: key) as? T
    }

    /// Stores `value` under `key`, releasing any previous value.
    @discardableResult
    public func setValue(_ value: any Sendable, forKey key: String) -> Bool {
        let raw = Unmanaged.passRetained(ThreadValueBox(value)).toOpaque()
        let ok = RLThread.swiftKey(key).withCString {
            RLThreadDictionarySetValue(ref, $0, raw, rlThreadValueDestructor)
        }
        if !ok { Unmanaged<ThreadValueBox>.fromOpaque(raw).release() }
        return ok
    }

    /// Removes `key`'s value; false if there was none.
    @discardableResult
    public func removeValue(forKey key: String) -> Bool {
        RLThread.swiftKey(key).withCString { RLThreadDictionaryRemoveValue(ref, $0) }
    }

    private static func swiftKey(_ key: String) -> String { "swift." + key }

    // MARK: Wrapper registry (one Swift object per C thread while alive)

    /// C thread → its wrapper and, for a thread created from Swift, its
    /// state.
    fileprivate static let registry = RLWrapperRegistry<RLThread, ThreadState>()

    private static func key(_ ref: RLThreadRef) -> UInt { RLWrapperRegistry<RLThread, ThreadState>.key(ref) }

    /// The live wrapper of `ref`, or a new one (retaining `ref`), which finds
    /// the Swift state of a thread created from Swift.
    ///
    /// If `ref` can no longer be retained (it is being destroyed) the
    /// wrapper does not own it and is not cached: it is only meaningful for
    /// the duration of the callout that made it.
    static func wrapper(for ref: RLThreadRef) -> RLThread {
        registry.wrapper(for: key(ref)) { state in
            let thread = RLThread(retaining: ref, state: state)
            return (thread, state, thread.reference.owned)
        }
    }
}

extension RLThread: Hashable {
    /// Two wrappers are equal when they wrap the same C thread.
    public static func == (lhs: RLThread, rhs: RLThread) -> Bool { lhs.ref == rhs.ref }
    public func hash(into hasher: inout Hasher) { hasher.combine(RLThread.key(ref)) }
}

extension RLThread: CustomStringConvertible {
    public var description: String { rlCopyDescription(UnsafeRawPointer(ref)) ?? "RLThread" }
}

// MARK: - Support

/// The Swift side of a thread created from Swift: its body, how the body
/// ended, and the error handler. Owned by the C thread's block (while it
/// may run) and by the wrappers.
private final class ThreadState: @unchecked Sendable {
    enum Outcome {
        case success(any Sendable)
        case failure(any Error)
    }

    private let body: @Sendable () throws -> any Sendable
    private let mutex = ThreadsMutex()
    private var _outcome: Outcome?
    private var _errorHandler: (@Sendable (any Error) -> Void)?

    /// The C thread's registry key, set once before the thread can start.
    var registryKey: UInt = 0

    init(body: @escaping @Sendable () throws -> any Sendable) { self.body = body }

    deinit { RLThread.registry.forget(registryKey) }

    var outcome: Outcome? { mutex.locked { _outcome } }

    var errorHandler: (@Sendable (any Error) -> Void)? {
        get { mutex.locked { _errorHandler } }
        set { mutex.locked { _errorHandler = newValue } }
    }

    /// The thread's entry: runs the body once and records how it ended.
    func run() {
        do {
            let value = try body()
            mutex.locked { _outcome = .success(value) }
        } catch {
            let handler: (@Sendable (any Error) -> Void)? = mutex.locked {
                _outcome = .failure(error)
                return _errorHandler
            }
            if let handler {
                handler(error)
            } else {
                let name = RLThread.current.name.map { " \"\($0)\"" } ?? ""
                rlWriteStandardError("SwiftThreads: RLThread\(name) body threw an uncaught error: \(error)\n")
            }
        }
    }
}

/// Writes `text` to file descriptor 2 (no shared `stderr` FILE).
func rlWriteStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

/// One thread-dictionary value, handed to C retained.
private final class ThreadValueBox: Sendable {
    let value: any Sendable
    init(_ value: any Sendable) { self.value = value }
}

private func rlThreadValueDestructor(_ raw: UnsafeMutableRawPointer?) {
    guard let raw else { return }
    Unmanaged<ThreadValueBox>.fromOpaque(raw).release()
}

/// The retain callback of `RLThreadDictionaryCopyValue`: one more reference
/// on the box, for the reader.
private func rlThreadValueRetain(_ raw: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let raw else { return nil }
    _ = Unmanaged<ThreadValueBox>.fromOpaque(raw).retain()
    return raw
}

