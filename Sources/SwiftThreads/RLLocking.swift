internal import CRunLoop
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

// The synchronization toolkit, Foundation name -> SwiftThreads name -> C:
//
//   NSLocking             RLLocking             -
//   NSLock                RLLock                RLLockRef
//   NSRecursiveLock       RLRecursiveLock       RLRecursiveLockRef
//   NSCondition           RLCondition           RLConditionRef
//   NSConditionLock       RLConditionLock       RLConditionLockRef
//   pthread_rwlock_t      RLReadWriteLock       RLReadWriteLockRef
//   OSSpinLock            RLSpinLock            RLSpinLock (a value)
//   NSDistributedLock     RLDistributedLock     RLDistributedLockRef
//   dispatch_once         RLOnce                RLOnceToken
//   @synchronized         synchronized(_:_:)    RLSyncEnter / RLSyncExit
//   OSAtomic*32 / *64     RLAtomicInt32/Int64   RLAtomic*32 / *64
//   OSAtomicTestAndSet    RLAtomicBits          RLAtomicTestAndSet
//   OSMemoryBarrier       RLAtomic.memoryBarrier RLMemoryBarrier
//   (no peer: lockdep)    RLLockDebug           RLLockDebug*
//   Date, TimeInterval    RLAbsoluteTime, RLTimeInterval (Double seconds;
//                         date.timeIntervalSinceReferenceDate converts)
//
// Foundation spells `tryLock` as `try()`; here it is `tryLock()`.

/// The locking vocabulary shared by every SwiftThreads lock (Foundation's
/// `NSLocking`, with checked results).
///
/// `lock()` and `unlock()` return `false` when the call is a misuse — locking
/// a non-recursive lock the caller already holds (where `NSLock` would hang
/// forever), unlocking a lock the caller does not hold — and then leave the
/// lock as it was; `RLError.last()` says why. Throwing twins
/// (`checkedLock()`, `checkedUnlock()`) turn the failure into an `RLError`.
public protocol RLLocking: AnyObject, Sendable {
    /// Blocks until the calling thread holds the lock; `false` if it cannot
    /// (see `RLError.last()`). `file` and `line` name the caller's source
    /// position in lock-order reports (`RLLockDebug`); the conforming types
    /// default them to `#fileID` and `#line`, so `lock.lock()` names the
    /// line that wrote it.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    @discardableResult func lock(file: StaticString, line: UInt) -> Bool
    /// Releases the lock; `false` (nothing changed) if the calling thread
    /// does not hold it.
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    @discardableResult func unlock() -> Bool
}

extension RLLocking {
    /// `lock(file:line:)` through a generic or `any RLLocking` value, where
    /// the caller's position cannot be defaulted: reports show the return
    /// address instead.
    @discardableResult
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func lock() -> Bool { lock(file: "", line: 0) }

    /// Runs `body` with the lock held and releases it on every exit path,
    /// including a throw. Lock-order reports name the caller's `file` and
    /// `line`.
    ///
    /// Traps with the library's message if the lock cannot be taken (for
    /// example the calling thread already holds this non-recursive lock):
    /// running `body` unprotected, or hanging as `NSLock` does, would be worse.
    @inlinable
    public func withLock<R>(file: StaticString = #fileID, line: UInt = #line,
                            _ body: () throws -> R) rethrows -> R {
        guard lock(file: file, line: line) else { rlLockFailed(Self.self, "withLock") }
        defer { unlock() }
        return try body()
    }

    /// `lock()`, throwing the library's error instead of returning `false`.
    @available(*, noasync, message: "blocks the thread; use withLock(_:), which cannot hold the lock across an await")
    public func checkedLock() throws(RLError) {
        if !lock() { throw RLError.last() }
    }

    /// `unlock()`, throwing the library's error instead of returning `false`
    /// (`.notLocked`, `.notOwner`).
    @available(*, noasync, message: "pairs with a blocking lock(); use withLock(_:)")
    public func checkedUnlock() throws(RLError) {
        if !unlock() { throw RLError.last() }
    }
}

/// The trap behind `withLock` when the lock could not be taken.
@usableFromInline
func rlLockFailed(_ type: Any.Type, _ function: String) -> Never {
    fatalError("\(type).\(function): cannot take the lock: \(RLError.last().message)")
}

// ---- helpers shared by the lock wrappers ----

/// Runs the C acquisition `take` with the caller's source position named
/// for the lock-order detector (`RLLockDebugSetCallSite`: one relaxed load
/// when the detector is off). A failed acquisition drops the position, so
/// it cannot be pinned on a later one. Line 0 names nothing.
@inline(__always)
func rlAcquire(_ file: StaticString, _ line: UInt, _ take: () -> Bool) -> Bool {
    guard line != 0, file.hasPointerRepresentation else { return take() }
    let cFile = UnsafeRawPointer(file.utf8Start).assumingMemoryBound(to: CChar.self)
    RLLockDebugSetCallSite(cFile, Int32(truncatingIfNeeded: line))
    let ok = take()
    if !ok { RLLockDebugSetCallSite(nil, 0) }
    return ok
}

/// Throws the thread's last C error when a C call reported failure.
@inline(__always)
func rlCheck(_ ok: Bool) throws(RLError) {
    if !ok { throw RLError.last() }
}

/// A C `...CopyName` result as a Swift name: `nil` for "" and on failure;
/// frees the C string.
func rlTakeName(_ cName: UnsafeMutablePointer<CChar>?) -> String? {
    guard let cName else { return nil }
    defer { free(cName) }
    let name = String(cString: cName)
    return name.isEmpty ? nil : name
}

/// Gives up the wrapper's one C reference. RLRelease refuses while the lock
/// is held; if the dying wrapper's thread is the holder, `unlockIfHeld`
/// releases it and the release is retried. A lock held by another thread,
/// which can no longer reach it, is left alive rather than destroyed under
/// that thread.
func rlReleaseLock(_ ref: OpaquePointer, unlockIfHeld: () -> Bool) {
    let object = UnsafeRawPointer(ref)
    if RLRelease(object) { return }
    while unlockIfHeld() {
        if RLRelease(object) { return }
    }
}
