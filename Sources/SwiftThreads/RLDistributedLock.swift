internal import CRunLoop

/// A lock named by a file path, shared by processes on this host or on
/// hosts sharing a file system (NFS included): Foundation's
/// `NSDistributedLock` over C's `RLDistributedLockRef`.
///
/// `tryLock()` never waits. The lock belongs to this object, not to a
/// thread: any thread may unlock it. Nothing breaks a lock on its own; a
/// holder that died is recognised through `owner?.state == .dead` and
/// recovered with `breakLock()`. Dropping the last reference to an object
/// that holds the lock unlocks it.
public final class RLDistributedLock: @unchecked Sendable {
    // @unchecked: the C object is thread-safe and `ref` never changes.
    let ref: RLDistributedLockRef

    /// A lock object for the lock file at `path`; does not take the lock.
    /// Throws `.invalidArgument` (empty path, a directory), `.notFound` (the
    /// directory is missing) or `.permission` (it is not writable).
    public init(path: String) throws(RLError) {
        guard let ref = RLDistributedLockCreate(path) else { throw RLError.last() }
        self.ref = ref
    }

    deinit { rlReleaseLock(ref) { RLDistributedLockUnlock(ref) } }

    /// The lock file's path.
    public var path: String { String(cString: RLDistributedLockGetPath(ref)) }

    /// `RLDistributedLockTryLock`: takes the lock if nobody holds it; `false`
    /// (`.busy`, or `.exists` when this object already holds it) otherwise.
    public func tryLock() -> Bool { RLDistributedLockTryLock(ref) }

    /// `RLDistributedLockUnlock`: releases the lock this object holds;
    /// `false` (`.notOwner`, nothing removed) if someone broke it meanwhile,
    /// `.notLocked` if this object does not hold it.
    @discardableResult public func unlock() -> Bool { RLDistributedLockUnlock(ref) }

    /// `unlock()`, throwing the library's error instead of returning `false`.
    public func checkedUnlock() throws(RLError) { try rlCheck(unlock()) }

    /// `RLDistributedLockBreakLock`: removes the lock file whoever holds it;
    /// `false` (`.notLocked`) if there was none.
    @discardableResult public func breakLock() -> Bool { RLDistributedLockBreakLock(ref) }

    /// Whether this object holds the lock (a break from elsewhere is only
    /// noticed by the next `unlock()`).
    public var isHeld: Bool { RLDistributedLockIsHeld(ref) }

    /// When the current lock file was created, by any holder (`nil` when
    /// nobody holds the lock): `NSDistributedLock.lockDate`. Where
    /// SwiftThreadsFoundation is imported it is a `Date?`; this form is
    /// disfavored there.
    @_disfavoredOverload
    public var lockDate: RLAbsoluteTime? {
        let date = RLDistributedLockCopyLockDate(ref)
        return date.isNaN ? nil : date
    }

    /// The current holder's record, `nil` when nobody holds the lock or the
    /// lock file holds no readable record (`RLError.last()` says which).
    public var owner: Owner? {
        var record = RLDistributedLockOwner()
        guard RLDistributedLockCopyOwner(ref, &record) else { return nil }
        return Owner(record)
    }

    /// Whether the process named by an owner record still runs.
    public enum OwnerState: Sendable {
        /// Another host, or the record cannot be checked.
        case unknown
        /// Same host and boot; that process still runs.
        case alive
        /// Same host; the process (or the boot) is gone: the lock is stale.
        case dead
    }

    /// Who holds a lock, as written in its lock file.
    public struct Owner: Sendable, Equatable {
        /// The holder's host name.
        public let hostName: String
        /// The holder's process id.
        public let pid: Int32
        /// The holder's start time, in clock ticks since its host booted
        /// (tells a reused pid apart).
        public let processStartTicks: UInt64
        /// The holder's host boot id.
        public let bootID: String
        /// When the holder took the lock, by its clock (a `Date` where
        /// SwiftThreadsFoundation is imported; this form is disfavored there).
        @_disfavoredOverload
        public let lockDate: RLAbsoluteTime
        /// Whether the holder was alive when the record was read
        /// (`RLDistributedLockOwnerGetState`).
        public let state: OwnerState

        init(_ record: RLDistributedLockOwner) {
            var record = record
            hostName = withUnsafeBytes(of: record.hostName) { rlString(fromCField: $0) }
            bootID = withUnsafeBytes(of: record.bootID) { rlString(fromCField: $0) }
            pid = record.pid
            processStartTicks = record.processStartTicks
            lockDate = record.lockDate
            switch RLDistributedLockOwnerGetState(&record) {
            case .alive: state = .alive
            case .dead: state = .dead
            default: state = .unknown
            }
        }
    }
}

/// A fixed-size C `char[]` field as a String: up to its first NUL, never
/// past the field even if the NUL is missing.
private func rlString(fromCField bytes: UnsafeRawBufferPointer) -> String {
    String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
}
