// Plumbing.swift — what every wrapper shares: the overlay's one lock and
// one lock-protected value (used by every piece of shared state here), the
// wrapper registry, the owned C reference and the callback box.
//
// A pthread mutex, not `Synchronization.Mutex`: ThreadSanitizer does not
// see Mutex's futex hand-off and reports false races. Not an RL lock
// either: the lock-order detector (RLLockDebug) must not watch the
// overlay's own bookkeeping.
internal import CRunLoop
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

// MARK: - Wrapper registries

/// C object → its Swift objects: one table per kind of C object whose
/// wrapper must be unique (run loops, threads, ports, message ports).
///
/// An entry holds, weakly, the wrapper of a C object while one is alive
/// (so a C object has one wrapper at a time and `===` works), and the
/// Swift state every wrapper of that object shares, its companion (a
/// thread's body, a port's receivers), so that a wrapper made later finds
/// it. The entry goes when both are gone: the wrapper's and the
/// companion's deinit call ``forget(_:)``. The registry retains neither a
/// C object nor a Swift one; objects it reads under its lock are released
/// after the lock (their deinit takes that lock).
final class RLWrapperRegistry<Wrapper: AnyObject, Companion: AnyObject>: Sendable {
    struct Entry {
        weak var wrapper: Wrapper?
        weak var companion: Companion?
    }

    private let table = ThreadsMutexProtected<[UInt: Entry]>([:])

    init() {}

    /// The key of a C object: its address.
    static func key(_ ref: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: ref)) }

    /// The live wrapper of `key` if `reuse` accepts it, else the one `make`
    /// makes given the entry's companion (nil if none is alive); recorded,
    /// with the companion `make` returns, when `record` is true (false: a
    /// wrapper of a C object being destroyed, meaningful only during the
    /// callout that made it). `make` runs under the registry's lock: it
    /// must not call user code or the registry.
    func wrapper(for key: UInt, reuse: (Wrapper) -> Bool = { _ in true },
                 make: (_ companion: Companion?) -> (wrapper: Wrapper, companion: Companion?, record: Bool)) -> Wrapper {
        table.withLockHolding { table, held in
            // What is returned outlives the lock; what is not is held.
            if let existing = table[key]?.wrapper {
                if reuse(existing) { return existing }
                held.append(existing)
            }
            let companion = table[key]?.companion
            if let companion { held.append(companion) }
            let made = make(companion)
            if made.record { table[key] = Entry(wrapper: made.wrapper, companion: made.companion) }
            return made.wrapper
        }
    }

    /// Records `wrapper` and `companion` as those of `key`'s C object
    /// (a new C object, or one whose address was reused).
    func record(_ key: UInt, wrapper: Wrapper?, companion: Companion?) {
        table.withLock { table in table[key] = Entry(wrapper: wrapper, companion: companion) }
    }

    /// The live companion of `key`.
    func companion(for key: UInt) -> Companion? {
        table.withLock { table in table[key]?.companion }
    }

    /// The live companion of `key`, or `make()`'s, recorded (with no
    /// wrapper) under the same lock.
    func companion(for key: UInt, orRecord make: () -> Companion) -> Companion {
        table.withLock { table in
            if let companion = table[key]?.companion { return companion }
            let companion = make()
            table[key] = Entry(wrapper: nil, companion: companion)
            return companion
        }
    }

    /// Drops `key`'s entry if neither its wrapper nor its companion is
    /// alive; called from their deinits (where their own weak reference
    /// reads nil already).
    func forget(_ key: UInt) {
        table.withLockHolding { table, held in
            guard let entry = table[key] else { return }
            let wrapper = entry.wrapper, companion = entry.companion
            held += [wrapper as AnyObject?, companion as AnyObject?].compactMap { $0 }
            if wrapper == nil && companion == nil { table[key] = nil }
        }
    }

    /// Entries (for tests: the table must not grow with objects that are
    /// gone).
    var count: Int { table.withLock { $0.count } }
}

// MARK: - C references

/// The one reference a wrapper owns on its C object, released when the
/// wrapper goes — after the wrapper's own deinit, so that a registry entry
/// is forgotten before the C object can be finalized (which may call back
/// into Swift). Not copyable: one release for one reference.
struct OwnedRef: ~Copyable {
    let pointer: OpaquePointer
    /// False for a wrapper made while its C object is being destroyed (its
    /// retain failed): such a wrapper releases nothing and is meaningful
    /// only during the callout that made it.
    let owned: Bool

    /// Takes over a reference the caller owns (Create rule).
    init(adopting pointer: OpaquePointer) {
        self.pointer = pointer
        owned = true
    }

    /// Takes a reference of its own.
    init(retaining pointer: OpaquePointer) {
        self.pointer = pointer
        owned = RLRetain(UnsafeRawPointer(pointer)) != nil
    }

    deinit {
        if owned { RLRelease(UnsafeRawPointer(pointer)) }
    }
}

// MARK: - Callback boxes

/// The Swift side of one C object that calls back into Swift (a timer's
/// closure, a port's receivers, …), handed to C as its context's `info`.
///
/// The C object owns the box: it takes its reference through the context's
/// `retain` (``rlBoxRetain(_:)-(UnsafeRawPointer?)``) and gives it back
/// through `release` (``rlBoxRelease(_:)-(UnsafeRawPointer?)``) exactly
/// once, when it is freed, so the closure lives as long as the C object
/// may call it. ``owner`` is the wrapper made with the C object while the
/// user holds it: weak, because that wrapper owns the C object, which owns
/// the box. Each kind of box is a subclass adding its closures and state.
class RLCallbackBox<Owner: AnyObject>: @unchecked Sendable {
    /// The wrapper made with the C object, set once before the C object can
    /// call back; nil once the user dropped it.
    weak var owner: Owner?

    init() {}

    /// The context's `info`: this box, unretained (the C object retains it
    /// through the context's `retain`; ``withContextInfo(_:)`` keeps it
    /// alive until then).
    final var info: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Runs `create` (the C call that takes the context) with this box
    /// alive throughout: the C object has retained it by the time it
    /// returns.
    final func withContextInfo<R>(_ create: (UnsafeMutableRawPointer) throws -> R) rethrows -> R {
        try withExtendedLifetime(self) { try create(info) }
    }

    /// The box a C callback was handed as `info` (not retained: the C
    /// object holds it while it calls).
    static func from(_ info: UnsafeMutableRawPointer) -> Self {
        Unmanaged<Self>.fromOpaque(info).takeUnretainedValue()
    }

    /// Whether `info` (a C object's context) is this box.
    final func isInfo(_ info: UnsafeRawPointer?) -> Bool { info == UnsafeRawPointer(self.info) }

    /// The user's wrapper while it is alive, else `make()` (a wrapper for
    /// this callout, retaining the C object).
    final func wrapper(orMake make: () -> Owner) -> Owner { owner ?? make() }
}

/// The `retain` of a C context whose `info` is an ``RLCallbackBox``.
func rlBoxRetain(_ info: UnsafeRawPointer?) -> UnsafeRawPointer? {
    if let info { _ = Unmanaged<AnyObject>.fromOpaque(info).retain() }
    return info
}

/// The `release` balancing ``rlBoxRetain(_:)-(UnsafeRawPointer?)``.
func rlBoxRelease(_ info: UnsafeRawPointer?) {
    if let info { Unmanaged<AnyObject>.fromOpaque(info).release() }
}

/// ``rlBoxRetain(_:)-(UnsafeRawPointer?)`` for a context typed with mutable
/// pointers (streams).
func rlBoxRetain(_ info: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    if let info { _ = Unmanaged<AnyObject>.fromOpaque(info).retain() }
    return info
}

/// ``rlBoxRelease(_:)-(UnsafeRawPointer?)`` for a context typed with
/// mutable pointers (streams).
func rlBoxRelease(_ info: UnsafeMutableRawPointer?) {
    if let info { Unmanaged<AnyObject>.fromOpaque(info).release() }
}
