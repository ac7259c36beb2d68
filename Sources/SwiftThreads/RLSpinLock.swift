internal import CRunLoop

/// A spin lock (`OSSpinLock`) over C's `RLSpinLock`, for critical sections
/// of a handful of instructions. Waiters spin with back-off, then yield the
/// CPU; they never sleep. `RLLock` is the right default.
///
/// Unlike `OSSpinLock` the lock records its holder: locking it again from
/// the holding thread returns `false` (`.wouldDeadlock`) instead of spinning
/// forever, and unlocking returns `false` (`.notOwner` from another thread,
/// `.notLocked` when free) and changes nothing.
public final class RLSpinLock: RLLocking, @unchecked Sendable {
    // @unchecked: the word is only touched through the C atomics; its
    // address never changes.
    private let word: UnsafeMutablePointer<CRunLoop.RLSpinLock>

    public init() {
        word = .allocate(capacity: 1)
        word.initialize(to: CRunLoop.RLSpinLock())
    }

    deinit {
        word.deinitialize(count: 1)
        word.deallocate()
    }

    /// `RLSpinLockLock`: spins until the lock is free, then takes it.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    @discardableResult public func lock(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        rlAcquire(file, line) { RLSpinLockLock(word) }
    }

    /// `RLSpinLockUnlock`. `false` (`.notLocked`, `.notOwner`) if the caller
    /// does not hold the lock.
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    @discardableResult public func unlock() -> Bool { RLSpinLockUnlock(word) }

    /// `RLSpinLockTry`: takes the lock if it is free, never spins; `false`
    /// (`.busy`) if any thread holds it.
    public func tryLock() -> Bool { RLSpinLockTry(word) }

    /// Whether some thread holds the lock right now (a snapshot).
    public var isLocked: Bool { RLSpinLockIsLocked(word) }
}
