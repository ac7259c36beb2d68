/// Waiting in tests for work that runs on our run loops.
///
/// XCTest's `wait(for:timeout:)` and `XCTNSPredicateExpectation` spin
/// Foundation's `RunLoop`, not ours: timers, perform requests and sources
/// scheduled on an ``RLRunLoop`` do not run while a test waits that way.
/// ``RLRunLoop/runUntil(timeout:mode:_:)`` runs the calling thread's loop
/// instead, until a condition holds or a timeout passes:
///
///     // Swift Testing
///     @Test func timerFires() {
///         let fired = RLAtomicInt32(0)
///         RLTimer.scheduledTimer(withTimeInterval: 0.01, repeats: false) { _ in _ = fired.add(1) }
///         #expect(RLRunLoop.current.runUntil(timeout: .seconds(5)) { fired.load() == 1 })
///     }
///
///     // XCTest
///     func testTimerFires() {
///         let fired = RLAtomicInt32(0)
///         RLTimer.scheduledTimer(withTimeInterval: 0.01, repeats: false) { _ in _ = fired.add(1) }
///         XCTAssertTrue(RLRunLoop.current.runUntil(timeout: .seconds(5)) { fired.load() == 1 })
///     }
extension RLRunLoop {
    /// Runs this loop, which must be the calling thread's, in `mode` until
    /// `condition` returns true or `timeout` has passed, and returns whether
    /// the condition held. The condition is checked first (a condition that
    /// holds already runs nothing), after every pass of the loop, and at
    /// least every 5 ms, so that a change made by another thread without
    /// waking this loop is seen too. A mode with nothing in it is not an
    /// error: the thread then sleeps between checks.
    ///
    /// Called on another thread's loop it runs nothing and returns the
    /// condition's value at once. `timeout` is a bound for a test that
    /// would otherwise hang, not a measurement.
    @discardableResult
    @available(*, noasync, message: "runs the loop, blocking the thread; in async code await the condition (the loop runs on its own thread)")
    public func runUntil(timeout: Duration = .seconds(10), mode: Mode = .default,
                         _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = RLTime.after(timeout)
        guard isCurrentThreadLoop else { return try condition() }
        while true {
            if try condition() { return true }
            let left = deadline - RLTime.now
            if left <= 0 { return false }
            let slice = min(left, 0.005)
            switch try? run(mode: mode, for: slice, returnAfterSourceHandled: true) {
            case .handledSource?, .timedOut?, .stopped?:
                break
            case .finished?, nil:
                // Nothing to run in `mode` (or a mode that cannot run):
                // wait for another thread to make the condition true.
                RLThread.sleep(forTimeInterval: slice)
            }
        }
    }
}
