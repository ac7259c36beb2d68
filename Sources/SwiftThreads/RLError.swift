internal import CRunLoop

/// A failed SwiftThreads call: the C library's thread-local error
/// (`RLErrorGetLast()`), as a typed Swift value.
public struct RLError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The C error code, one of `kRLError…`.
    public enum Code: Int32, Sendable {
        /// kRLErrorNone
        case none = 0
        /// kRLErrorInvalidArgument: NULL, NaN, negative or out-of-range value.
        case invalidArgument = 1
        /// kRLErrorInvalidObject: released, invalidated or wrong-type object.
        case invalidObject = 2
        /// kRLErrorNotOwner: unlock by a thread that does not hold the lock.
        case notOwner = 3
        /// kRLErrorNotLocked: unlock of a lock nobody holds.
        case notLocked = 4
        /// kRLErrorBusy: object in use.
        case busy = 5
        /// kRLErrorTimedOut: a timed wait reached its date.
        case timedOut = 6
        /// kRLErrorWouldDeadlock: the call would block forever.
        case wouldDeadlock = 7
        /// kRLErrorInvalidState: not allowed in the object's current state.
        case invalidState = 8
        /// kRLErrorWrongThread: must be called on another thread.
        case wrongThread = 9
        /// kRLErrorSystem: an OS call failed.
        case system = 10
        /// kRLErrorNoMemory
        case noMemory = 11
        /// kRLErrorNotFound
        case notFound = 12
        /// kRLErrorPermission
        case permission = 13
        /// kRLErrorExists
        case exists = 14
        /// A code this version of the overlay does not know.
        case unknown = -1
    }

    public let code: Code
    /// errno of the failed OS call, or 0.
    public let systemErrno: Int32
    public let message: String

    public init(code: Code, systemErrno: Int32 = 0, message: String) {
        self.code = code
        self.systemErrno = systemErrno
        self.message = message
    }

    public var description: String { message }

    /// The calling thread's last C error.
    public static func last() -> RLError {
        let e = RLErrorGetLast()
        return RLError(code: Code(rawValue: e.code.rawValue) ?? .unknown,
                       systemErrno: e.systemErrno,
                       message: String(cString: e.message))
    }

    /// Forgets the calling thread's last error.
    public static func clear() { RLErrorClear() }
}
