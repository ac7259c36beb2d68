internal import CRunLoop

/// A spin lock (`OSSpinLock`) over C's `RLSpinLock`, for critical sections
/// of a handful of instructions. Waiters spin with back-off, then yield the
/// CPU; they never sleep. `RLLock` is the right default.
///
/// As in C the lock records no owner: any thread may unlock it, and locking
/// it again from the thread that holds it spins forever. Unlocking a lock
/// that is not locked returns `false` (`.notLocked`) and changes nothing.
public final class RLSpinLock: RLLocking, @unchecked Sendable {
    // @unchecked: the word is only touched through the C atomics; its
    // address never changes.
    private let word: UnsafeMutablePointer<CRunLoop.RLSpinLock>

    public init() {
        word = .allocate(capacity: 1)
        word.initialize(to: CRunLoop.RLSpinLock(_state: 0))
    }

    deinit {
        word.deinitialize(count: 1)
        word.deallocate()
    }

    /// `RLSpinLockLock`: spins until the lock is free, then takes it.
    @discardableResult public func lock() -> Bool { RLSpinLockLock(word) }

    /// `RLSpinLockUnlock`. `false` (`.notLocked`) if the lock is not locked.
    @discardableResult public func unlock() -> Bool { RLSpinLockUnlock(word) }

    /// `RLSpinLockTry`: takes the lock if it is free, never spins. A busy
    /// lock records no error.
    public func tryLock() -> Bool { RLSpinLockTry(word) }

    /// Whether some thread holds the lock right now (a snapshot).
    public var isLocked: Bool { RLSpinLockIsLocked(word) }
}
