// Plumbing.swift — the overlay's one lock and one lock-protected value,
// used by every wrapper registry and every piece of shared state here.
//
// A pthread mutex, not `Synchronization.Mutex`: ThreadSanitizer does not
// see Mutex's futex hand-off and reports false races. Not an RL lock
// either: the lock-order detector (RLLockDebug) must not watch the
// overlay's own bookkeeping.
internal import CSwiftThreadsShims
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Musl)
internal import Musl
#endif

/// A pthread mutex (not `Synchronization.Mutex`, whose futex hand-off
/// ThreadSanitizer does not see).
final class ThreadsMutex: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// For a critical section that must move a value in without a
    /// closure capturing (and so copying) it; ``locked(_:)`` otherwise.
    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    func locked<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A value only touched under its mutex.
final class ThreadsMutexProtected<Value>: @unchecked Sendable {
    private let mutex = ThreadsMutex()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try mutex.locked { try body(&value) }
    }

    /// ``withLock(_:)`` for a body that reads weak references (a registry
    /// of wrappers): each object read is held for a moment, and if another
    /// thread drops its last other reference meanwhile, the body's read is
    /// the last one. The body puts what it read in `held`, released after
    /// the lock is let go, so that such an object's deinit (which may take
    /// this very lock) does not run under it.
    func withLockHolding<R>(_ body: (inout Value, inout [AnyObject]) throws -> R) rethrows -> R {
        var held: [AnyObject] = []
        defer { withExtendedLifetime(held) {} }
        return try mutex.locked { try body(&value, &held) }
    }
}

/// A hand-off ThreadSanitizer cannot see, told to it (SwiftThreadsShims.h):
/// an object made on one thread and handed to a task through the
/// concurrency runtime (a continuation's resume, an AsyncStream). The
/// producer publishes a point once what it hands on is complete, before it
/// hands it on; the consumer receives the same point before it reads
/// anything the producer made. Nothing happens without ThreadSanitizer.
enum HandOff {
    static func publish(_ point: AnyObject) {
        rl_swift_handoff_publish(UnsafeRawPointer(Unmanaged.passUnretained(point).toOpaque()))
    }

    static func received(_ point: AnyObject) {
        rl_swift_handoff_received(UnsafeRawPointer(Unmanaged.passUnretained(point).toOpaque()))
    }
}

/// A point to publish and receive when the object handed on is not known
/// to both sides in advance (a continuation's value).
final class HandOffPoint: Sendable {}
