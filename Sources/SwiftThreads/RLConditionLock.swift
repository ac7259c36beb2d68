internal import CRunLoop

/// A lock that carries an integer condition: Foundation's `NSConditionLock`
/// over C's `RLConditionLockRef`. `lock(whenCondition:)` waits until the
/// lock is free *and* its condition has the value asked for;
/// `unlock(withCondition:)` sets the value and releases the lock.
///
///     producer:  queue.lock();  ...add...;  queue.unlock(withCondition: hasData)
///     consumer:  queue.lock(whenCondition: hasData);  ...take...
///                queue.unlock(withCondition: isEmpty ? noData : hasData)
///
/// Plain `unlock()` leaves the condition as it is and wakes nobody waiting
/// for a condition.
public final class RLConditionLock: RLLocking, @unchecked Sendable {
    // @unchecked: the C object is thread-safe and `ref` never changes.
    let ref: RLConditionLockRef

    /// A new unlocked lock whose condition is `condition`
    /// (`RLConditionLockCreateWithCondition`).
    public init(condition: Int = 0, name: String? = nil) {
        guard let ref = RLConditionLockCreateWithCondition(condition) else {
            fatalError("RLConditionLock: \(RLError.last().message)")
        }
        self.ref = ref
        if let name { RLConditionLockSetName(ref, name) }
    }

    deinit { rlReleaseLock(ref) { RLConditionLockUnlock(ref) } }

    /// The current condition (`RLConditionLockGetCondition`).
    public var condition: Int {
        var value: RLIndex = 0
        RLConditionLockGetCondition(ref, &value)
        return value
    }

    /// `RLConditionLockLock`: takes the lock whatever the condition.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    @discardableResult public func lock(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        rlAcquire(file, line) { RLConditionLockLock(ref) }
    }

    /// `RLConditionLockUnlock`: releases the lock; the condition is unchanged.
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    @discardableResult public func unlock() -> Bool { RLConditionLockUnlock(ref) }

    /// `RLConditionLockTryLock`: never blocks.
    public func tryLock() -> Bool { RLConditionLockTryLock(ref) }

    /// `RLConditionLockLockBeforeDate`.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock(before limit: RLAbsoluteTime) -> Bool { RLConditionLockLockBeforeDate(ref, limit) }

    /// `RLConditionLockLockWhenCondition`: blocks until the lock is free and
    /// its condition is `condition`, then takes it.
    @available(*, noasync, message: "blocks the thread; wait in a thread of its own, or use Swift concurrency (a continuation) instead")
    @discardableResult public func lock(whenCondition condition: Int) -> Bool {
        RLConditionLockLockWhenCondition(ref, condition)
    }

    /// `RLConditionLockTryLockWhenCondition`: never blocks; `false` with
    /// `.busy` (held) or `.invalidState` (free, other condition).
    public func tryLock(whenCondition condition: Int) -> Bool {
        RLConditionLockTryLockWhenCondition(ref, condition)
    }

    /// `RLConditionLockLockWhenConditionBeforeDate`: `false` (`.timedOut`,
    /// lock not held) if `limit` passes first.
    @available(*, noasync, message: "blocks the thread; wait in a thread of its own, or use Swift concurrency (a continuation) instead")
    public func lock(whenCondition condition: Int, before limit: RLAbsoluteTime) -> Bool {
        RLConditionLockLockWhenConditionBeforeDate(ref, condition, limit)
    }

    /// Waits at most `timeout` for the condition.
    @available(*, noasync, message: "blocks the thread; wait in a thread of its own, or use Swift concurrency (a continuation) instead")
    public func lock(whenCondition condition: Int, timeout: Duration) -> Bool {
        lock(whenCondition: condition, before: RLTime.after(timeout))
    }

    /// `RLConditionLockUnlockWithCondition`: sets the condition and releases
    /// the lock in one step, waking the threads waiting for the new value.
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    @discardableResult public func unlock(withCondition condition: Int) -> Bool {
        RLConditionLockUnlockWithCondition(ref, condition)
    }

    /// Runs `body` once the condition is `condition`, then unlocks with the
    /// condition `body` returns, also when it throws (then with the
    /// condition unchanged).
    public func withLock<R>(whenCondition condition: Int,
                            _ body: () throws -> (result: R, newCondition: Int)) rethrows -> R {
        guard lock(whenCondition: condition) else { rlLockFailed(Self.self, "withLock(whenCondition:)") }
        var newCondition = condition
        defer { unlock(withCondition: newCondition) }
        let out = try body()
        newCondition = out.newCondition
        return out.result
    }

    public var name: String? {
        get { rlTakeName(RLConditionLockCopyName(ref)) }
        set { RLConditionLockSetName(ref, newValue) }
    }
}
