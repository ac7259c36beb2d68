internal import CRunLoop

/// A lock and a condition variable in one object: Foundation's `NSCondition`
/// over C's `RLConditionRef`.
///
///     cond.withLock {
///         while !ready { cond.wait() }
///         ...
///     }
///     // elsewhere
///     cond.withLock { ready = true; cond.signal() }
///
/// Wake-ups may be spurious: always wait in a loop over a predicate.
public final class RLCondition: RLLocking, @unchecked Sendable {
    // @unchecked: the C object is thread-safe and `ref` never changes.
    let ref: RLConditionRef

    public init(name: String? = nil) {
        guard let ref = RLConditionCreate() else {
            fatalError("RLCondition: \(RLError.last().message)")
        }
        self.ref = ref
        if let name { RLConditionSetName(ref, name) }
    }

    deinit { rlReleaseLock(ref) { RLConditionUnlock(ref) } }

    /// `RLConditionLock`. `false` if the caller already holds the lock.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    @discardableResult public func lock(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        rlAcquire(file, line) { CRunLoop.RLConditionLock(ref) }
    }

    /// `RLConditionUnlock`. `false` if the caller does not hold the lock.
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    @discardableResult public func unlock() -> Bool { RLConditionUnlock(ref) }

    /// `RLConditionTryLock`: never blocks.
    public func tryLock() -> Bool { RLConditionTryLock(ref) }

    /// `RLConditionLockBeforeDate`.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock(before limit: RLAbsoluteTime) -> Bool { RLConditionLockBeforeDate(ref, limit) }

    /// `RLConditionWait`: releases the lock, sleeps until signalled (or
    /// spuriously woken), takes the lock again. The caller must hold the
    /// lock; `false` (nothing waited) if it does not.
    @available(*, noasync, message: "blocks the thread; wait in a thread of its own, or use Swift concurrency (a continuation) instead")
    @discardableResult public func wait() -> Bool { RLConditionWait(ref) }

    /// `RLConditionWaitUntilDate`: as `wait()`, but `false` with
    /// `.timedOut` once `limit` has passed. The lock is held again on return
    /// whatever the result (unless the call was a misuse).
    @available(*, noasync, message: "blocks the thread; wait in a thread of its own, or use Swift concurrency (a continuation) instead")
    public func wait(until limit: RLAbsoluteTime) -> Bool { RLConditionWaitUntilDate(ref, limit) }

    /// Waits at most `timeout`; `false` when it ran out.
    @available(*, noasync, message: "blocks the thread; wait in a thread of its own, or use Swift concurrency (a continuation) instead")
    public func wait(timeout: Duration) -> Bool { wait(until: RLTime.after(timeout)) }

    /// `RLConditionSignal`: wakes at least one waiter, if any.
    @discardableResult public func signal() -> Bool { RLConditionSignal(ref) }

    /// `RLConditionBroadcast`: wakes every waiter.
    @discardableResult public func broadcast() -> Bool { RLConditionBroadcast(ref) }

    public var name: String? {
        get { rlTakeName(RLConditionCopyName(ref)) }
        set { RLConditionSetName(ref, newValue) }
    }
}
