internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

// Perform requests: NSObject's performSelector:onThread:…,
// performSelectorOnMainThread:…, performSelector:afterDelay:… and
// cancelPreviousPerformRequests, for Swift closures (C: RLPerform.h).
//
// A request runs on the target thread inside its run loop, when that loop
// runs in one of the request's modes; requests to one thread run in the
// order they were made, and the target's loop is woken. Closures handed to
// another thread are `@Sendable`.

extension RLThread {
    // MARK: Perform on a thread

    /// Runs `block` on this thread's run loop in `modes` (default: the
    /// common modes) — `performSelector:onThread:withObject:waitUntilDone:modes:`
    /// (`RLThreadPerformBlock`).
    ///
    /// With `waitUntilDone` on this thread itself the block runs at once, as
    /// in Cocoa; from another thread the call returns after the block ran.
    ///
    /// - Throws: `RLError` `.invalidState` if the thread was never started
    ///   or has finished — also while waiting, if it finishes without
    ///   running the block (never a hang); `.invalidArgument` for an empty
    ///   mode list. A failed call queues nothing.
    @available(*, noasync, message: "may block until the block ran; in async code use the form without waitUntilDone, or try await run(modes:_:)")
    public func perform(modes: [RLRunLoop.Mode] = [.common], waitUntilDone: Bool = false,
                        _ block: @escaping @Sendable () -> Void) throws(RLError) {
        let ok = rlWithModeList(modes) { list in RLThreadPerformBlock(ref, list, waitUntilDone, block) }
        guard ok else { throw RLError.last() }
    }

    /// ``perform(modes:waitUntilDone:_:)`` on `thread`.
    @available(*, noasync, message: "may block until the block ran; in async code use the form without waitUntilDone, or try await run(modes:_:)")
    public static func perform(on thread: RLThread, modes: [RLRunLoop.Mode] = [.common],
                               waitUntilDone: Bool = false,
                               _ block: @escaping @Sendable () -> Void) throws(RLError) {
        try thread.perform(modes: modes, waitUntilDone: waitUntilDone, block)
    }

    /// ``perform(modes:waitUntilDone:_:)`` on the main thread
    /// (`performSelectorOnMainThread:…`). The main thread must run its run
    /// loop for the block to run.
    @available(*, noasync, message: "may block until the block ran; in async code use the form without waitUntilDone, or try await RLThread.main.run(modes:_:)")
    public static func performOnMain(modes: [RLRunLoop.Mode] = [.common], waitUntilDone: Bool = false,
                                     _ block: @escaping @Sendable () -> Void) throws(RLError) {
        let ok = rlWithModeList(modes) { list in RLThreadPerformBlockOnMain(list, waitUntilDone, block) }
        guard ok else { throw RLError.last() }
    }

    /// ``perform(modes:waitUntilDone:_:)`` without waiting: queues `block`
    /// and returns at once. Usable from `async` code (the waiting form is
    /// `noasync`; its async counterpart is ``run(modes:_:)``).
    ///
    /// - Throws: as ``perform(modes:waitUntilDone:_:)``.
    public func perform(modes: [RLRunLoop.Mode] = [.common],
                        _ block: @escaping @Sendable () -> Void) throws(RLError) {
        let ok = rlWithModeList(modes) { list in RLThreadPerformBlock(ref, list, false, block) }
        guard ok else { throw RLError.last() }
    }

    /// ``perform(modes:_:)`` on `thread`.
    public static func perform(on thread: RLThread, modes: [RLRunLoop.Mode] = [.common],
                               _ block: @escaping @Sendable () -> Void) throws(RLError) {
        try thread.perform(modes: modes, block)
    }

    /// ``performOnMain(modes:waitUntilDone:_:)`` without waiting, usable
    /// from `async` code.
    public static func performOnMain(modes: [RLRunLoop.Mode] = [.common],
                                     _ block: @escaping @Sendable () -> Void) throws(RLError) {
        let ok = rlWithModeList(modes) { list in RLThreadPerformBlockOnMain(list, false, block) }
        guard ok else { throw RLError.last() }
    }

    /// Runs `body` on this thread's run loop (in `modes`) and suspends until
    /// it has run, returning its value or rethrowing its error. The loop is
    /// woken; the calling task does not block a thread while it waits.
    ///
    /// - Throws: `RLError` `.invalidState` if the thread was never started,
    ///   has finished, or finishes before running `body`.
    @discardableResult
    public func run<T: Sendable>(modes: [RLRunLoop.Mode] = [.common],
                                 _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await AsyncPerformRequest.outcome(of: body) { request in
            do {
                try perform(modes: modes) { request.run() }
            } catch {
                request.fail(error)
            }
        }
    }

    // MARK: Perform later on the calling thread

    /// Runs `block` on the calling thread after `delay` seconds, when its run
    /// loop runs in one of `modes` (default: the default mode, as
    /// `performSelector:withObject:afterDelay:`); negative delays count as 0
    /// (`RLThreadPerformBlockAfterDelay`).
    ///
    /// `tag`, if given, groups requests for
    /// ``cancelPreviousPerformRequests(tag:)`` (Cocoa's target + selector).
    ///
    /// - Returns: a token that cancels this one request; it belongs to the
    ///   calling thread.
    /// - Throws: `RLError` `.invalidArgument` for a NaN delay or an empty
    ///   mode list.
    @discardableResult
    public static func perform(after delay: RLTimeInterval, modes: [RLRunLoop.Mode] = [.default],
                               tag: (any Hashable & Sendable)? = nil,
                               _ block: @escaping @Sendable () -> Void) throws(RLError) -> RLDelayedPerform {
        guard let tag else {
            let token = rlWithModeList(modes) { list in RLThreadPerformBlockAfterDelay(delay, list, block) }
            guard token != 0 else { throw RLError.last() }
            return RLDelayedPerform(token: token)
        }
        // The table is the calling thread's; the block runs on this thread
        // too, so only this thread ever touches it.
        let table = DelayedPerformTable.current()
        let key = AnyHashable(tag)
        let cell = TokenCell()
        let token = rlWithModeList(modes) { list in
            RLThreadPerformBlockAfterDelay(delay, list) {
                DelayedPerformTable.current().remove(cell.token, for: key)
                block()
            }
        }
        guard token != 0 else { throw RLError.last() }
        cell.token = token
        table.add(token, for: key)
        return RLDelayedPerform(token: token)
    }

    /// ``perform(after:modes:tag:_:)`` with a `Duration`.
    @discardableResult
    public static func perform(after delay: Duration, modes: [RLRunLoop.Mode] = [.default],
                               tag: (any Hashable & Sendable)? = nil,
                               _ block: @escaping @Sendable () -> Void) throws(RLError) -> RLDelayedPerform {
        try perform(after: delay.rlSeconds, modes: modes, tag: tag, block)
    }

    /// Cancels every delayed request the calling thread made with `tag`
    /// that has not run yet (`cancelPreviousPerformRequestsWithTarget:`).
    ///
    /// - Returns: how many were cancelled.
    @discardableResult
    public static func cancelPreviousPerformRequests(tag: any Hashable & Sendable) -> Int {
        let table = DelayedPerformTable.current()
        var cancelled = 0
        for token in table.removeAll(for: AnyHashable(tag)) where RLThreadCancelPerformRequest(token) {
            cancelled += 1
        }
        return cancelled
    }
}

/// A delayed perform request of the thread that made it
/// (``RLThread/perform(after:modes:tag:_:)-(RLTimeInterval,_,_,_)``).
///
/// Thread-bound, so not `Sendable`: only the thread that made the request
/// can cancel it.
public struct RLDelayedPerform: Hashable {
    let token: UInt64

    /// Cancels the request if it has not run (`RLThreadCancelPerformRequest`).
    ///
    /// - Returns: false if it has run, was cancelled, or this is not the
    ///   thread that made it.
    @discardableResult
    public func cancel() -> Bool { RLThreadCancelPerformRequest(token) }
}

@available(*, unavailable, message: "a delayed perform request belongs to the thread that made it")
extension RLDelayedPerform: Sendable {}

// MARK: - Support

/// Calls `body` with `modes` as a NULL-terminated C array of mode names.
func rlWithModeList<R>(_ modes: [RLRunLoop.Mode],
                       _ body: (UnsafePointer<RLRunLoopMode?>) -> R) -> R {
    let names: [UnsafeMutablePointer<CChar>?] = modes.map { strdup($0.cName) }
    defer { for name in names { free(name) } }
    let list: [RLRunLoopMode?] = names.map { $0.map { UnsafePointer($0) } } + [nil]
    return list.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// The token of a tagged delayed request, known once it was queued; read by
/// the request's block on the same thread.
private final class TokenCell: @unchecked Sendable {
    var token: UInt64 = 0
}

/// The calling thread's tagged delayed requests. Only its own thread uses
/// it: requests are made, run and cancelled on the thread that made them.
private final class DelayedPerformTable: @unchecked Sendable {
    private var tokens: [AnyHashable: Set<UInt64>] = [:]

    private static let key = "swiftthreads.delayed-perform-tags"

    /// The calling thread's table, made on first use; released when the
    /// thread exits (the C thread dictionary's destructor).
    static func current() -> DelayedPerformTable {
        guard let thread = RLThreadGetCurrent() else { fatalError("RLThread: \(RLError.last())") }
        var raw: UnsafeMutableRawPointer?
        if RLThreadDictionaryGetValue(thread, key, &raw), let raw {
            return Unmanaged<DelayedPerformTable>.fromOpaque(raw).takeUnretainedValue()
        }
        let table = DelayedPerformTable()
        RLThreadDictionarySetValue(thread, key, Unmanaged.passRetained(table).toOpaque()) { raw in
            if let raw { Unmanaged<DelayedPerformTable>.fromOpaque(raw).release() }
        }
        return table
    }

    func add(_ token: UInt64, for key: AnyHashable) { tokens[key, default: []].insert(token) }

    func remove(_ token: UInt64, for key: AnyHashable) {
        tokens[key]?.remove(token)
        if tokens[key]?.isEmpty == true { tokens[key] = nil }
    }

    func removeAll(for key: AnyHashable) -> Set<UInt64> { tokens.removeValue(forKey: key) ?? [] }
}

/// One awaited perform (``RLThread/run(modes:_:)``,
/// ``RLRunLoop/performAndWait(inModes:_:)``, the worker's): resumed exactly
/// once — by the run; by the task's cancellation, if that comes before the
/// work started (the work is then never run, and its closure is released
/// at once); or, if the C library drops the queued block unrun (the thread
/// finished, the loop was torn down), by deinit.
///
/// Cancellation follows Swift concurrency's rule for work handed to
/// another executor: work that has started is not interrupted, and its
/// result (or error) is returned, cancelled or not; work that has not
/// started never starts, and the await throws `CancellationError` at once.
/// The C request stays queued and finds the request claimed when it runs.
///
/// The value or error is made on another thread and reaches the task
/// through the continuation: the request publishes `point` before it
/// resumes, and ``outcome(of:unrunMessage:submit:)`` receives it before it
/// returns, which is what ThreadSanitizer needs to see the hand-off
/// (``HandOff``).
final class AsyncPerformRequest<T: Sendable>: @unchecked Sendable {
    private let continuation: CheckedContinuation<T, any Error>
    // Under `mutex`: nil once claimed (run, failed or cancelled), so that
    // a cancelled request does not keep what the body captured.
    private var body: (@Sendable () throws -> T)?
    private let unrunMessage: String
    private let point: HandOffPoint
    private let mutex = ThreadsMutex()

    private init(continuation: CheckedContinuation<T, any Error>, body: @escaping @Sendable () throws -> T,
                 unrunMessage: String, point: HandOffPoint) {
        self.continuation = continuation
        self.body = body
        self.unrunMessage = unrunMessage
        self.point = point
    }

    /// Makes the request for `body`, gives it to `submit` (which queues
    /// `run()` somewhere, or calls `fail(_:)`), and suspends until it has
    /// run: its value, or its error, or `unrunMessage`'s error if the queued
    /// work was dropped unrun, or `CancellationError` if the task was
    /// cancelled before the work started (`submit` is not called when the
    /// task was cancelled already).
    ///
    /// Only the queued work holds the request: the waiting task and its
    /// cancellation handler reach it weakly, so that work dropped unrun
    /// releases it and its deinit resumes the task.
    static func outcome(of body: @escaping @Sendable () throws -> T,
                        unrunMessage: String = "RLThread.run: the thread finished before running the work",
                        submit: (AsyncPerformRequest<T>) -> Void) async throws -> T {
        let point = HandOffPoint()
        defer { HandOff.received(point) }
        let slot = CancellationSlot()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let request = AsyncPerformRequest(continuation: continuation, body: body,
                                                  unrunMessage: unrunMessage, point: point)
                if slot.attach(request) {
                    submit(request)
                } else {
                    request.fail(CancellationError())
                }
            }
        } onCancel: {
            slot.cancel()
        }
    }

    /// The link from a task's cancellation handler to its request: weak,
    /// and a flag for a cancellation that came before the request existed.
    private final class CancellationSlot: @unchecked Sendable {
        private let mutex = ThreadsMutex()
        private weak var request: AsyncPerformRequest<T>?
        private var cancelled = false

        /// Links `request`; false if the task was cancelled already.
        func attach(_ request: AsyncPerformRequest<T>) -> Bool {
            mutex.locked {
                guard !cancelled else { return false }
                self.request = request
                return true
            }
        }

        func cancel() {
            let request: AsyncPerformRequest<T>? = mutex.locked {
                cancelled = true
                return self.request
            }
            request?.fail(CancellationError())
        }
    }

    /// Takes the body, once: nil if the request was claimed already.
    private func claim() -> (@Sendable () throws -> T)? {
        mutex.lock()
        defer { mutex.unlock() }
        guard let body else { return nil }
        self.body = nil
        return body
    }

    func run() {
        guard let body = claim() else { return }
        let result = Result { try body() }
        HandOff.publish(point)
        continuation.resume(with: result)
    }

    /// Resumes the task with `error` unless the work has started (or the
    /// request was resumed already); the work will then not run.
    func fail(_ error: any Error) {
        guard let body = claim() else { return }
        withExtendedLifetime(body) {}
        HandOff.publish(point)
        continuation.resume(throwing: error)
    }

    deinit {
        fail(RLError(code: .invalidState, message: unrunMessage))
    }
}
