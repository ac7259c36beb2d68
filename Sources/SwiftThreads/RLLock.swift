internal import CRunLoop

/// A mutual-exclusion lock: Foundation's `NSLock` over C's `RLLockRef`.
///
/// Unlike `NSLock`, locking it again from the thread that holds it does not
/// hang: `lock()` returns `false` with `RLError.Code.wouldDeadlock`. Only the
/// thread that locked may unlock. Waiters sleep in the kernel.
public final class RLLock: RLLocking, @unchecked Sendable {
    // @unchecked: the C lock is thread-safe and `ref` never changes.
    let ref: RLLockRef

    /// A new unlocked lock, optionally named for descriptions and
    /// lock-order reports.
    public init(name: String? = nil) {
        guard let ref = RLLockCreate() else { fatalError("RLLock: \(RLError.last().message)") }
        self.ref = ref
        if let name { RLLockSetName(ref, name) }
    }

    deinit { rlReleaseLock(ref) { RLLockUnlock(ref) } }

    /// `RLLockLock`. `false` if the caller already holds the lock.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    @discardableResult public func lock(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        rlAcquire(file, line) { RLLockLock(ref) }
    }

    /// `RLLockUnlock`. `false` (`.notLocked`, `.notOwner`) if the caller
    /// does not hold the lock.
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    @discardableResult public func unlock() -> Bool { RLLockUnlock(ref) }

    /// `RLLockTryLock` (`NSLock.try()`): takes the lock if it is free,
    /// never blocks.
    public func tryLock() -> Bool { RLLockTryLock(ref) }

    /// `RLLockLockBeforeDate`: `false` (`.timedOut`) if `limit` passes first.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock(before limit: RLAbsoluteTime) -> Bool { RLLockLockBeforeDate(ref, limit) }

    /// Waits at most `timeout` for the lock.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock(timeout: Duration) -> Bool { lock(before: RLTime.after(timeout)) }

    /// The name (`nil` when unnamed), shown in descriptions and lock-order reports.
    public var name: String? {
        get { rlTakeName(RLLockCopyName(ref)) }
        set { RLLockSetName(ref, newValue) }
    }
}

/// A lock its holder may take again: Foundation's `NSRecursiveLock` over
/// C's `RLRecursiveLockRef`. It is free once every `lock()` is balanced by
/// an `unlock()`.
public final class RLRecursiveLock: RLLocking, @unchecked Sendable {
    // @unchecked: the C lock is thread-safe and `ref` never changes.
    let ref: RLRecursiveLockRef

    public init(name: String? = nil) {
        guard let ref = RLRecursiveLockCreate() else {
            fatalError("RLRecursiveLock: \(RLError.last().message)")
        }
        self.ref = ref
        if let name { RLRecursiveLockSetName(ref, name) }
    }

    deinit { rlReleaseLock(ref) { RLRecursiveLockUnlock(ref) } }

    /// `RLRecursiveLockLock`: blocks until the caller holds the lock; the
    /// holder takes it again at once.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    @discardableResult public func lock(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        rlAcquire(file, line) { RLRecursiveLockLock(ref) }
    }

    /// `RLRecursiveLockUnlock`: undoes one `lock()`.
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    @discardableResult public func unlock() -> Bool { RLRecursiveLockUnlock(ref) }

    /// `RLRecursiveLockTryLock`: takes the lock if it is free or already the
    /// caller's, never blocks.
    public func tryLock() -> Bool { RLRecursiveLockTryLock(ref) }

    /// `RLRecursiveLockLockBeforeDate`.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock(before limit: RLAbsoluteTime) -> Bool {
        RLRecursiveLockLockBeforeDate(ref, limit)
    }

    /// Waits at most `timeout` for the lock.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock(timeout: Duration) -> Bool { lock(before: RLTime.after(timeout)) }

    /// How many times the calling thread holds the lock (0: it does not).
    public var recursionCount: Int { RLRecursiveLockGetRecursionCount(ref) }

    public var name: String? {
        get { rlTakeName(RLRecursiveLockCopyName(ref)) }
        set { RLRecursiveLockSetName(ref, newValue) }
    }
}
