internal import CRunLoop

/// A value that belongs to one thread: a `Sendable` box that any thread may
/// hold and pass on, whose value only that thread may touch — swift-nio's
/// `NIOLoopBound`, for a thread.
///
/// Cocoa hands thread-bound objects to other threads freely
/// (`performSelector(onThread:withObject:…)` on a delegate); in Swift 6 a
/// closure that another thread holds must be `@Sendable`, and so must what
/// it captures. Capture the box instead of the object: a background job
/// tells its delegate on the delegate's own thread, a timer or signal
/// callout of the main loop reaches an object that lives on the main thread
/// — with no `@unchecked Sendable` on the object.
///
///     let controller = Controller()            // not Sendable; lives here
///     let bound = RLThreadBound(controller)    // bound to this thread
///     try RLThread.detachNewThread {
///         let result = compute()
///         try? bound.perform { $0.show(result) }   // on the controller's thread
///     }
///     RLRunLoop.current.run()                  // the thread runs its loop
///
/// ``value`` is checked: using it on another thread stops the process (a
/// thread-bound object used off its thread is a data race). From another
/// thread, ``perform(modes:_:)`` runs a closure with the value on the
/// owning thread's run loop.
///
/// The box keeps its value alive, so the last release of the value can
/// happen on whichever thread drops the last box: keep the object owned on
/// its own thread too (as a delegate's owner does), or bind a weak
/// reference.
public struct RLThreadBound<Value>: @unchecked Sendable {
    // Read and written only on `thread` (checked by `value`); other threads
    // only copy the box, which copies the reference or bits, never reads
    // through them.
    private var storage: Value

    /// The thread the value belongs to.
    public let thread: RLThread

    /// Binds `value` to the calling thread.
    public init(_ value: Value) {
        storage = value
        thread = RLThread.current
    }

    /// True when called on the thread the value belongs to.
    public var isOnOwningThread: Bool { RLThreadGetCurrent() == thread.ref }

    /// The value. Stops the process (`precondition`) when used on another
    /// thread than ``thread``.
    public var value: Value {
        get {
            checkThread()
            return storage
        }
        set {
            checkThread()
            storage = newValue
        }
    }

    /// Runs `body` with the value on the owning thread, in its run loop's
    /// `modes` (default: the common modes), and returns at once — a perform
    /// request (``RLThread/perform(modes:waitUntilDone:_:)``): requests to
    /// one thread run in the order they were made, when it runs its loop.
    ///
    /// - Throws: `RLError` `.invalidState` if the thread has finished (the
    ///   body is released unrun), `.invalidArgument` for an empty mode list.
    public func perform(modes: [RLRunLoop.Mode] = [.common],
                        _ body: @escaping @Sendable (Value) -> Void) throws(RLError) {
        try thread.perform(modes: modes) { body(self.value) }
    }

    private func checkThread() {
        precondition(isOnOwningThread,
                     "RLThreadBound: the value of \(thread) was used on \(RLThread.current)")
    }
}

/// Mutable state that belongs to one thread, shared by reference: a
/// `Sendable` box that any thread may hold, whose value only that thread
/// may read or change — swift-nio's `NIOLoopBoundBox`, for a thread.
///
/// ``RLThreadBound`` is a value: each copy has its own value, so a closure
/// that captured it cannot change what the owning thread sees. This box is
/// a class: every holder sees the one value, and a closure performed on the
/// owning thread (``perform(modes:_:)``) can update it in place.
///
///     let state = RLThreadBoundBox(0, thread: worker.thread!)  // from anywhere
///     try state.perform { $0 += 1 }           // on the worker, in its loop
///     try worker.async { print(state.value) } // on the worker: allowed
///
/// ``value`` and ``withValue(_:)`` are checked: used on another thread they
/// stop the process (a data race otherwise). Make the box on the owning
/// thread with ``init(_:)``; from another thread, with a value handed over
/// (``init(_:thread:)``, which takes a `sending` value: nothing else can
/// touch it any more) or empty (``makeEmptyBox(of:thread:)``).
public final class RLThreadBoundBox<Value>: @unchecked Sendable {
    // Read and written only on `thread` (checked), or by the initializer
    // before the box is shared.
    private var storage: Value

    /// The thread the value belongs to.
    public let thread: RLThread

    /// Binds `value` to the calling thread.
    public init(_ value: Value) {
        storage = value
        thread = RLThread.current
    }

    /// Binds `value` to `thread`, from any thread: the value is `sending`,
    /// so the caller cannot keep a way to touch it.
    public init(_ value: sending Value, thread: RLThread) {
        storage = value
        self.thread = thread
    }

    /// An empty box bound to `thread`, made from any thread (nil is the
    /// same on every thread); fill it on `thread`.
    public static func makeEmptyBox<Wrapped>(of type: Wrapped.Type = Wrapped.self,
                                             thread: RLThread) -> RLThreadBoundBox<Wrapped?>
        where Value == Wrapped? {
        RLThreadBoundBox<Wrapped?>(nil, thread: thread)
    }

    /// True when called on the thread the value belongs to.
    public var isOnOwningThread: Bool { RLThreadGetCurrent() == thread.ref }

    /// The value. Stops the process (`precondition`) when used on another
    /// thread than ``thread``.
    public var value: Value {
        get {
            checkThread()
            return storage
        }
        set {
            checkThread()
            storage = newValue
        }
    }

    /// Runs `body` with the value, which it may change in place, on the
    /// owning thread (checked as ``value``).
    public func withValue<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        checkThread()
        return try body(&storage)
    }

    /// Runs `body` with the value, which it may change in place, on the
    /// owning thread's run loop in `modes` (default: the common modes), and
    /// returns at once — a perform request, as
    /// ``RLThreadBound/perform(modes:_:)``.
    ///
    /// - Throws: `RLError` `.invalidState` if the thread was never started
    ///   or has finished (the body is released unrun), `.invalidArgument`
    ///   for an empty mode list.
    public func perform(modes: [RLRunLoop.Mode] = [.common],
                        _ body: @escaping @Sendable (inout Value) -> Void) throws(RLError) {
        try thread.perform(modes: modes) { self.withValue(body) }
    }

    /// Runs `body` with the value on the owning thread's run loop and
    /// suspends until it ran, returning its result (``RLThread/run(modes:_:)``:
    /// a task cancelled before the body started throws `CancellationError`
    /// and the body never runs).
    public func run<R: Sendable>(modes: [RLRunLoop.Mode] = [.common],
                                 _ body: @escaping @Sendable (inout Value) throws -> R) async throws -> R {
        try await thread.run(modes: modes) { try self.withValue(body) }
    }

    private func checkThread() {
        precondition(isOnOwningThread,
                     "RLThreadBoundBox: the value of \(thread) was used on \(RLThread.current)")
    }
}
