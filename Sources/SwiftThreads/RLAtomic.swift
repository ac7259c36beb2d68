internal import CRunLoop

/// The memory ordering of an atomic operation: which of the C table's two
/// forms runs (`RLAtomicAdd32` or `RLAtomicAdd32Barrier`, ...).
public enum RLAtomicOrdering: Sendable {
    /// The plain form: atomic, but orders no other memory access
    /// (`memory_order_relaxed`, OSAtomic's plain forms). Right for counters.
    case relaxed
    /// The `Barrier` form: sequentially consistent; writes before the call
    /// are visible to any thread that sees its result.
    case barrier
}

/// Free functions of the atomic toolkit.
public enum RLAtomic {
    /// `RLMemoryBarrier` (`OSMemoryBarrier`): a full sequentially consistent fence.
    public static func memoryBarrier() { RLMemoryBarrier() }
}

/// A 32-bit integer that many threads update through the `RLAtomic…32`
/// operations of the C table (`OSAtomic.h`'s 32-bit rows).
///
/// The value lives in memory the object owns, at an address that never
/// changes, so it is only ever touched atomically. Arithmetic and logic
/// return the new value, the `…Orig` logic forms the value before; the
/// ordering defaults to `.barrier`.
///
///     let hits = RLAtomicInt32()
///     hits.increment(ordering: .relaxed)
///
/// Bits: `testAndSet(bit:)` uses Apple's numbering, as the guide's Listing
/// 4-1 shows: on a value of 0, bit 0 sets 128, bit 7 sets 1, bit 15 sets 256.
public final class RLAtomicInt32: @unchecked Sendable {
    // @unchecked: `pointer` is fixed and only accessed through C atomics.
    private let pointer: UnsafeMutablePointer<Int32>

    public init(_ value: Int32 = 0) {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: value)
    }

    deinit {
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }

    /// `RLAtomicLoad32[Barrier]`: the value now, read atomically.
    public func load(ordering: RLAtomicOrdering = .barrier) -> Int32 {
        ordering == .barrier ? RLAtomicLoad32Barrier(pointer) : RLAtomicLoad32(pointer)
    }

    /// `RLAtomicStore32[Barrier]`: replaces the value atomically.
    public func store(_ newValue: Int32, ordering: RLAtomicOrdering = .barrier) {
        if ordering == .barrier {
            RLAtomicStore32Barrier(newValue, pointer)
        } else {
            RLAtomicStore32(newValue, pointer)
        }
    }

    /// `RLAtomicAdd32[Barrier]`: adds `amount` (wrapping); the new value.
    @discardableResult
    public func add(_ amount: Int32, ordering: RLAtomicOrdering = .barrier) -> Int32 {
        ordering == .barrier ? RLAtomicAdd32Barrier(amount, pointer) : RLAtomicAdd32(amount, pointer)
    }

    /// `RLAtomicIncrement32[Barrier]`: the new value.
    @discardableResult
    public func increment(ordering: RLAtomicOrdering = .barrier) -> Int32 {
        ordering == .barrier ? RLAtomicIncrement32Barrier(pointer) : RLAtomicIncrement32(pointer)
    }

    /// `RLAtomicDecrement32[Barrier]`: the new value.
    @discardableResult
    public func decrement(ordering: RLAtomicOrdering = .barrier) -> Int32 {
        ordering == .barrier ? RLAtomicDecrement32Barrier(pointer) : RLAtomicDecrement32(pointer)
    }

    /// `RLAtomicCompareAndSwap32[Barrier]`: stores `desired` only if the
    /// value is `expected`; whether it did. Never fails spuriously.
    @discardableResult
    public func compareAndSwap(expected: Int32, desired: Int32,
                               ordering: RLAtomicOrdering = .barrier) -> Bool {
        ordering == .barrier
            ? RLAtomicCompareAndSwap32Barrier(expected, desired, pointer)
            : RLAtomicCompareAndSwap32(expected, desired, pointer)
    }

    /// `RLAtomicOr32[Barrier]`: the new value.
    @discardableResult
    public func or(_ mask: UInt32, ordering: RLAtomicOrdering = .barrier) -> Int32 {
        withBits { ordering == .barrier ? RLAtomicOr32Barrier(mask, $0) : RLAtomicOr32(mask, $0) }
    }

    /// `RLAtomicOr32Orig[Barrier]`: the value before.
    @discardableResult
    public func orOriginal(_ mask: UInt32, ordering: RLAtomicOrdering = .barrier) -> Int32 {
        withBits { ordering == .barrier ? RLAtomicOr32OrigBarrier(mask, $0) : RLAtomicOr32Orig(mask, $0) }
    }

    /// `RLAtomicAnd32[Barrier]`: the new value.
    @discardableResult
    public func and(_ mask: UInt32, ordering: RLAtomicOrdering = .barrier) -> Int32 {
        withBits { ordering == .barrier ? RLAtomicAnd32Barrier(mask, $0) : RLAtomicAnd32(mask, $0) }
    }

    /// `RLAtomicAnd32Orig[Barrier]`: the value before.
    @discardableResult
    public func andOriginal(_ mask: UInt32, ordering: RLAtomicOrdering = .barrier) -> Int32 {
        withBits { ordering == .barrier ? RLAtomicAnd32OrigBarrier(mask, $0) : RLAtomicAnd32Orig(mask, $0) }
    }

    /// `RLAtomicXor32[Barrier]`: the new value.
    @discardableResult
    public func xor(_ mask: UInt32, ordering: RLAtomicOrdering = .barrier) -> Int32 {
        withBits { ordering == .barrier ? RLAtomicXor32Barrier(mask, $0) : RLAtomicXor32(mask, $0) }
    }

    /// `RLAtomicXor32Orig[Barrier]`: the value before.
    @discardableResult
    public func xorOriginal(_ mask: UInt32, ordering: RLAtomicOrdering = .barrier) -> Int32 {
        withBits { ordering == .barrier ? RLAtomicXor32OrigBarrier(mask, $0) : RLAtomicXor32Orig(mask, $0) }
    }

    /// `RLAtomicTestAndSet[Barrier]`: sets bit `bit` (0..<32, Apple's
    /// numbering: `0x80 >> (bit & 7)` of byte `bit >> 3`); the bit's old
    /// value. Traps if `bit` is out of range.
    @discardableResult
    public func testAndSet(bit: Int, ordering: RLAtomicOrdering = .barrier) -> Bool {
        let n = RLAtomicBits.check(bit, byteCount: 4)
        return ordering == .barrier ? RLAtomicTestAndSetBarrier(n, pointer) : RLAtomicTestAndSet(n, pointer)
    }

    /// `RLAtomicTestAndClear[Barrier]`: clears bit `bit`; its old value.
    @discardableResult
    public func testAndClear(bit: Int, ordering: RLAtomicOrdering = .barrier) -> Bool {
        let n = RLAtomicBits.check(bit, byteCount: 4)
        return ordering == .barrier ? RLAtomicTestAndClearBarrier(n, pointer) : RLAtomicTestAndClear(n, pointer)
    }

    /// The C logic operations take `uint32_t *`; Int32 and UInt32 may alias.
    private func withBits(_ body: (UnsafeMutablePointer<UInt32>) -> Int32) -> Int32 {
        UnsafeMutableRawPointer(pointer).withMemoryRebound(to: UInt32.self, capacity: 1, body)
    }
}

/// A 64-bit integer that many threads update through the `RLAtomic…64`
/// operations (8-byte aligned, so each is a single instruction).
public final class RLAtomicInt64: @unchecked Sendable {
    // @unchecked: `pointer` is fixed and only accessed through C atomics.
    private let pointer: UnsafeMutablePointer<Int64>

    public init(_ value: Int64 = 0) {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: value)
    }

    deinit {
        pointer.deinitialize(count: 1)
        pointer.deallocate()
    }

    /// `RLAtomicLoad64[Barrier]`: the value now, read atomically.
    public func load(ordering: RLAtomicOrdering = .barrier) -> Int64 {
        ordering == .barrier ? RLAtomicLoad64Barrier(pointer) : RLAtomicLoad64(pointer)
    }

    /// `RLAtomicStore64[Barrier]`: replaces the value atomically.
    public func store(_ newValue: Int64, ordering: RLAtomicOrdering = .barrier) {
        if ordering == .barrier {
            RLAtomicStore64Barrier(newValue, pointer)
        } else {
            RLAtomicStore64(newValue, pointer)
        }
    }

    /// `RLAtomicAdd64[Barrier]`: the new value.
    @discardableResult
    public func add(_ amount: Int64, ordering: RLAtomicOrdering = .barrier) -> Int64 {
        ordering == .barrier ? RLAtomicAdd64Barrier(amount, pointer) : RLAtomicAdd64(amount, pointer)
    }

    /// `RLAtomicIncrement64[Barrier]`: the new value.
    @discardableResult
    public func increment(ordering: RLAtomicOrdering = .barrier) -> Int64 {
        ordering == .barrier ? RLAtomicIncrement64Barrier(pointer) : RLAtomicIncrement64(pointer)
    }

    /// `RLAtomicDecrement64[Barrier]`: the new value.
    @discardableResult
    public func decrement(ordering: RLAtomicOrdering = .barrier) -> Int64 {
        ordering == .barrier ? RLAtomicDecrement64Barrier(pointer) : RLAtomicDecrement64(pointer)
    }

    /// `RLAtomicCompareAndSwap64[Barrier]`.
    @discardableResult
    public func compareAndSwap(expected: Int64, desired: Int64,
                               ordering: RLAtomicOrdering = .barrier) -> Bool {
        ordering == .barrier
            ? RLAtomicCompareAndSwap64Barrier(expected, desired, pointer)
            : RLAtomicCompareAndSwap64(expected, desired, pointer)
    }

    /// `RLAtomicTestAndSet[Barrier]` on bit `bit` (0..<64, Apple's numbering).
    @discardableResult
    public func testAndSet(bit: Int, ordering: RLAtomicOrdering = .barrier) -> Bool {
        let n = RLAtomicBits.check(bit, byteCount: 8)
        return ordering == .barrier ? RLAtomicTestAndSetBarrier(n, pointer) : RLAtomicTestAndSet(n, pointer)
    }

    /// `RLAtomicTestAndClear[Barrier]` on bit `bit` (0..<64).
    @discardableResult
    public func testAndClear(bit: Int, ordering: RLAtomicOrdering = .barrier) -> Bool {
        let n = RLAtomicBits.check(bit, byteCount: 8)
        return ordering == .barrier ? RLAtomicTestAndClearBarrier(n, pointer) : RLAtomicTestAndClear(n, pointer)
    }
}

/// A fixed-size array of bits set and cleared atomically with
/// `RLAtomicTestAndSet` / `RLAtomicTestAndClear`, Apple's numbering: bit
/// `n` is the mask `0x80 >> (n & 7)` of byte `n >> 3`.
public final class RLAtomicBits: @unchecked Sendable {
    // @unchecked: `words` is fixed and only accessed through C atomics.
    private let words: UnsafeMutablePointer<UInt32>
    private let wordCount: Int
    /// How many bits there are.
    public let count: Int

    /// `count` bits, all clear.
    public init(count: Int) {
        precondition(count >= 0, "RLAtomicBits: negative count")
        self.count = count
        wordCount = max(1, (count + 31) / 32)
        words = .allocate(capacity: wordCount)
        words.initialize(repeating: 0, count: wordCount)
    }

    deinit {
        words.deinitialize(count: wordCount)
        words.deallocate()
    }

    /// Sets bit `bit`; its old value. Traps if `bit` is out of range.
    @discardableResult
    public func testAndSet(_ bit: Int, ordering: RLAtomicOrdering = .barrier) -> Bool {
        let n = Self.check(bit, bitCount: count)
        return ordering == .barrier ? RLAtomicTestAndSetBarrier(n, words) : RLAtomicTestAndSet(n, words)
    }

    /// Clears bit `bit`; its old value. Traps if `bit` is out of range.
    @discardableResult
    public func testAndClear(_ bit: Int, ordering: RLAtomicOrdering = .barrier) -> Bool {
        let n = Self.check(bit, bitCount: count)
        return ordering == .barrier ? RLAtomicTestAndClearBarrier(n, words) : RLAtomicTestAndClear(n, words)
    }

    /// Whether bit `bit` is set now (an atomic read with a full barrier).
    public subscript(bit: Int) -> Bool {
        let n = Int(Self.check(bit, bitCount: count))
        // Read the whole 32-bit word atomically, then pick the bit's byte by
        // its address, so the answer is endian-independent.
        let word = UnsafeMutableRawPointer(words + (n >> 5)).withMemoryRebound(to: Int32.self, capacity: 1) {
            UInt32(bitPattern: RLAtomicLoad32Barrier($0))
        }
        let byte = withUnsafeBytes(of: word) { $0[(n >> 3) & 3] }
        return byte & (0x80 >> UInt8(n & 7)) != 0
    }

    static func check(_ bit: Int, bitCount: Int) -> UInt32 {
        precondition(bit >= 0 && bit < bitCount, "RLAtomicBits: bit \(bit) out of range 0..<\(bitCount)")
        return UInt32(bit)
    }

    static func check(_ bit: Int, byteCount: Int) -> UInt32 {
        check(bit, bitCount: byteCount * 8)
    }
}
