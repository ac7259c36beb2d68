internal import CRunLoop

/// A shared-exclusive lock over C's `RLReadWriteLockRef`: many readers at
/// once, or one writer. A waiting writer holds back new readers, so readers
/// cannot starve it; a reader may take the read lock again while it holds
/// it, even while a writer waits.
///
/// As an `RLLocking`, `lock()` takes the write (exclusive) lock. One
/// `unlock()` releases whichever hold the calling thread has. Calls that
/// would block forever (asking for the write lock while holding a read
/// lock, any lock while holding the write lock) return `false` with
/// `.wouldDeadlock`.
public final class RLReadWriteLock: RLLocking, @unchecked Sendable {
    // @unchecked: the C lock is thread-safe and `ref` never changes.
    let ref: RLReadWriteLockRef

    public init(name: String? = nil) {
        guard let ref = RLReadWriteLockCreate() else {
            fatalError("RLReadWriteLock: \(RLError.last().message)")
        }
        self.ref = ref
        if let name { RLReadWriteLockSetName(ref, name) }
    }

    deinit { rlReleaseLock(ref) { RLReadWriteLockUnlock(ref) } }

    /// `RLReadWriteLockReadLock`: blocks until the caller shares the lock.
    @available(*, noasync, message: "blocks the thread; use withReadLock(_:) or withWriteLock(_:)")
    @discardableResult public func readLock(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        rlAcquire(file, line) { RLReadWriteLockReadLock(ref) }
    }
    /// `RLReadWriteLockTryReadLock`: never blocks.
    public func tryReadLock() -> Bool { RLReadWriteLockTryReadLock(ref) }
    /// `RLReadWriteLockReadLockBeforeDate`.
    @available(*, noasync, message: "blocks the thread; use withReadLock(_:) or withWriteLock(_:)")
    public func readLock(before limit: RLAbsoluteTime) -> Bool {
        RLReadWriteLockReadLockBeforeDate(ref, limit)
    }

    /// `RLReadWriteLockWriteLock`: blocks until the caller holds the lock alone.
    @available(*, noasync, message: "blocks the thread; use withReadLock(_:) or withWriteLock(_:)")
    @discardableResult public func writeLock(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        rlAcquire(file, line) { RLReadWriteLockWriteLock(ref) }
    }
    /// `RLReadWriteLockTryWriteLock`: never blocks.
    public func tryWriteLock() -> Bool { RLReadWriteLockTryWriteLock(ref) }
    /// `RLReadWriteLockWriteLockBeforeDate`.
    @available(*, noasync, message: "blocks the thread; use withReadLock(_:) or withWriteLock(_:)")
    public func writeLock(before limit: RLAbsoluteTime) -> Bool {
        RLReadWriteLockWriteLockBeforeDate(ref, limit)
    }

    /// The write lock (`RLLocking`).
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    @discardableResult public func lock(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        writeLock(file: file, line: line)
    }

    /// `RLReadWriteLockUnlock`: releases the caller's write lock or one of
    /// its read locks.
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    @discardableResult public func unlock() -> Bool { RLReadWriteLockUnlock(ref) }

    /// Runs `body` holding a read lock, released on every exit path.
    /// Traps if the read lock cannot be taken (the caller holds the write lock).
    public func withReadLock<R>(file: StaticString = #fileID, line: UInt = #line, _ body: () throws -> R) rethrows -> R {
        guard readLock(file: file, line: line) else { rlLockFailed(Self.self, "withReadLock") }
        defer { unlock() }
        return try body()
    }

    /// Runs `body` holding the write lock, released on every exit path.
    /// Traps if the write lock cannot be taken (the caller holds a lock).
    public func withWriteLock<R>(file: StaticString = #fileID, line: UInt = #line, _ body: () throws -> R) rethrows -> R {
        guard writeLock(file: file, line: line) else { rlLockFailed(Self.self, "withWriteLock") }
        defer { unlock() }
        return try body()
    }

    public var name: String? {
        get { rlTakeName(RLReadWriteLockCopyName(ref)) }
        set { RLReadWriteLockSetName(ref, newValue) }
    }
}
