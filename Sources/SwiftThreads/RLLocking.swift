/// The locking vocabulary shared by every SwiftThreads lock (Foundation's
/// `NSLocking`, with a checked unlock).
///
/// `unlock()` returns `false` when the calling thread may not unlock (it does
/// not hold the lock); the lock stays usable and `RLError.last()` says why.
public protocol RLLocking: AnyObject, Sendable {
    func lock()
    @discardableResult func unlock() -> Bool
}

extension RLLocking {
    /// Runs `body` with the lock held and releases it on every exit path,
    /// including a throw.
    @inlinable
    public func withLock<R>(_ body: () throws -> R) rethrows -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}
