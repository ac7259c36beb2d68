// RLConcurrency.swift — the `async` counterparts of the overlay's blocking
// calls, for code that must not block its executor's thread (the blocking
// forms are `@available(*, noasync)`):
//
//   RLThread.sleep(for:) / sleep(forTimeInterval:)  ->  try await RLThread.sleep(for:)
//   RLThread.sleep(until:)                          ->  try await RLThread.sleep(until:)
//   RLThread.perform(…, waitUntilDone: true)        ->  try await thread.run(modes:_:)
//   RLRunLoop.run… (the loop's own thread)          ->  an RLWorkerThread: run(_:), its TaskExecutor
//   RLWorkerThread.sync(_:)                         ->  try await worker.run(_:)
//   RLMessagePort.sendRequest(…) (blocking)         ->  try await port.request(msgid:data:timeout:)
//   RLWorkerThread.stop()                           ->  try await worker.shutdownGracefully()
//   RLThread.join() / join(as:)                     ->  try await thread.joined() / joined(as:)
//   lock() / unlock(), condition waits              ->  withLock(_:) (never held across an await)

extension RLThread {
    /// Suspends the calling task for `duration` without blocking its
    /// thread (`Task.sleep(for:)`, on the continuous clock); the async
    /// counterpart of the blocking ``sleep(for:)``.
    ///
    /// - Throws: `CancellationError` if the task is cancelled before the
    ///   time is up (the sleep ends early).
    public static func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }

    /// Suspends the calling task until `date` (seconds since 2001, as
    /// ``RLTime/now``) without blocking its thread; a date in the past
    /// returns at once. As the blocking ``sleep(until:)``, the date is
    /// turned into a duration on entry: a later change of the wall clock
    /// does not move the end of the sleep.
    ///
    /// - Throws: `CancellationError` if the task is cancelled first;
    ///   `RLError` `.invalidArgument` for a NaN date.
    public static func sleep(until date: RLAbsoluteTime) async throws {
        guard !date.isNaN else {
            throw RLError(code: .invalidArgument, message: "RLThread.sleep(until:): NaN date")
        }
        let seconds = date - RLTime.now
        guard seconds > 0 else {
            try Task.checkCancellation()
            return
        }
        try await Task.sleep(for: .seconds(min(seconds, RLTime.distantFuture)))
    }
}

/// Runs `call`, a call that blocks until a thread ends, on a short-lived
/// thread of its own and suspends the caller until it returns: no thread of
/// the caller's executor blocks meanwhile. Cancelling the caller does not
/// stop the call.
private func rlAwaitBlocking<T: Sendable>(_ call: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let waiter = RLThread(block: { continuation.resume(with: Result(catching: call)) })
        do {
            try waiter.start()
        } catch {
            continuation.resume(throwing: error)
        }
    }
}

extension RLWorkerThread {
    /// Stops the worker and suspends until its thread has exited (after its
    /// will-exit handlers) and was joined; queued work runs first. The
    /// async counterpart of the blocking ``stop()``, named as swift-nio's
    /// `EventLoopGroup.shutdownGracefully()`: the wait happens on a thread
    /// of its own, not on the caller's executor. Cancelling the calling
    /// task does not cut the shutdown short.
    ///
    /// - Throws: `RLError` `.invalidState` if the worker is not running (or
    ///   another stop is under way); `.wouldDeadlock` when called on the
    ///   worker itself (from work or a task it runs): the worker cannot
    ///   wait for its own end.
    public func shutdownGracefully() async throws(RLError) {
        if isCurrent {
            throw RLError(code: .wouldDeadlock,
                          message: "RLWorkerThread.shutdownGracefully(): called on the worker itself")
        }
        do {
            try await rlAwaitBlocking { () throws -> Void in try self.stop() }
        } catch let error as RLError {
            throw error
        } catch {
            throw RLError(code: .unknown, message: "\(error)")
        }
    }
}

extension RLThread {
    /// Suspends until a joinable thread has fully exited (its will-exit
    /// handlers included) and returns its body's result, as ``join()`` does
    /// without blocking the caller's executor (the wait happens on a thread
    /// of its own). Cancelling the calling task does not end the wait.
    ///
    /// - Throws: the error the body threw; `RLError` `.wouldDeadlock` on
    ///   the thread itself, `.invalidState` for a detached, unstarted, main
    ///   or foreign thread, or one already joined.
    @discardableResult
    public func joined() async throws -> (any Sendable)? {
        if self == RLThread.current {
            throw RLError(code: .wouldDeadlock, message: "RLThread.joined(): a thread cannot wait for its own end")
        }
        return try await rlAwaitBlocking { () throws -> Box in Box(value: try self.join()) }.value
    }

    /// ``joined()``, with the result as `T`.
    ///
    /// - Throws: as ``joined()``; `RLError` `.invalidArgument` if the body
    ///   returned something other than a `T`.
    public func joined<T: Sendable>(as type: T.Type) async throws -> T? {
        guard let value = try await joined() else { return nil }
        guard let typed = value as? T else {
            throw RLError(code: .invalidArgument,
                          message: "RLThread.joined(as:): the body returned \(Swift.type(of: value)), not \(T.self)")
        }
        return typed
    }

    /// An optional existential handed back from the waiting thread.
    private struct Box: Sendable {
        let value: (any Sendable)?
    }
}
