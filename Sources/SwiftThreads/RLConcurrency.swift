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
