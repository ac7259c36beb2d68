internal import CRunLoop

/// Runs `body` holding `object`'s monitor, Objective-C's
/// `@synchronized(object) { ... }`, over C's `RLSyncEnter` / `RLSyncExit`.
///
/// Any class instance names a monitor by its identity; nothing needs
/// creating. (A value turned into an object with `as AnyObject` is boxed
/// anew each time, so it names a different monitor on every call: pass the
/// instance that owns the state.) The monitor is recursive (a thread
/// holding it may enter again) and is released on every exit path,
/// including a throw.
///
///     synchronized(account) { account.balance += amount }
///
/// Traps if the monitor cannot be made (out of memory). Lock-order reports
/// name the caller's `file` and `line`.
public func synchronized<R>(_ object: AnyObject, file: StaticString = #fileID, line: UInt = #line,
                            _ body: () throws -> R) rethrows -> R {
    try withExtendedLifetime(object) {
        let address = RLSync.address(of: object)
        guard rlAcquire(file, line, { RLSyncEnter(address) }) else {
            fatalError("synchronized: \(RLError.last().message)")
        }
        defer { RLSyncExit(address) }
        return try body()
    }
}

/// The `@synchronized` monitors one call at a time, for code that cannot
/// bracket its critical section in a closure. Prefer `synchronized(_:_:)`.
/// The caller keeps `object` alive while it holds the monitor.
public enum RLSync {
    /// `RLSyncEnter`: waits while another thread holds the monitor.
    @discardableResult
    public static func enter(_ object: AnyObject, file: StaticString = #fileID, line: UInt = #line) -> Bool {
        rlAcquire(file, line) { RLSyncEnter(address(of: object)) }
    }

    /// `RLSyncTryEnter`: enters only if no other thread holds the monitor;
    /// `false` (`.busy`) if one does.
    public static func tryEnter(_ object: AnyObject) -> Bool { RLSyncTryEnter(address(of: object)) }

    /// `RLSyncExit`: leaves once. `false` (`.notLocked`, `.notOwner`, nothing
    /// changed) if the calling thread has not entered.
    @discardableResult
    public static func exit(_ object: AnyObject) -> Bool { RLSyncExit(address(of: object)) }

    /// `RLSyncIsHeldByCurrentThread`.
    public static func isHeldByCurrentThread(_ object: AnyObject) -> Bool {
        RLSyncIsHeldByCurrentThread(address(of: object))
    }

    static func address(of object: AnyObject) -> UnsafeRawPointer {
        UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque())
    }
}
