import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftThreads

@Suite struct AtomicTests {
    @Test func guideListing4_1() {
        // The Threading Programming Guide's Listing 4-1, value for value.
        let v = RLAtomicInt32(0)
        v.increment()
        #expect(v.load() == 1)
        v.decrement()
        #expect(v.load() == 0)
        v.store(0)
        v.testAndSet(bit: 0)
        #expect(v.load() == 128)
        v.store(0)
        v.testAndSet(bit: 7)
        #expect(v.load() == 1)
        v.store(0)
        v.testAndSet(bit: 15)
        #expect(v.load() == 256)
        v.compareAndSwap(expected: 256, desired: 512)
        #expect(v.load() == 512)
        v.compareAndSwap(expected: 256, desired: 1024)
        #expect(v.load() == 512)
    }

    @Test(arguments: [RLAtomicOrdering.relaxed, .barrier])
    func int32Arithmetic(ordering: RLAtomicOrdering) {
        let v = RLAtomicInt32(10)
        #expect(v.add(5, ordering: ordering) == 15)
        #expect(v.add(-20, ordering: ordering) == -5)
        #expect(v.increment(ordering: ordering) == -4)
        #expect(v.decrement(ordering: ordering) == -5)
        v.store(Int32.max)
        #expect(v.add(1, ordering: ordering) == Int32.min)  // wraps, as in C
        #expect(v.compareAndSwap(expected: Int32.min, desired: 7, ordering: ordering))
        #expect(!v.compareAndSwap(expected: Int32.min, desired: 8, ordering: ordering))
        #expect(v.load() == 7)
    }

    @Test(arguments: [RLAtomicOrdering.relaxed, .barrier])
    func int32Logic(ordering: RLAtomicOrdering) {
        let v = RLAtomicInt32(0b1100)
        #expect(v.or(0b0011, ordering: ordering) == 0b1111)
        #expect(v.and(0b0110, ordering: ordering) == 0b0110)
        #expect(v.xor(0b0101, ordering: ordering) == 0b0011)
        #expect(v.orOriginal(0b1000, ordering: ordering) == 0b0011)
        #expect(v.load() == 0b1011)
        #expect(v.andOriginal(0b0001, ordering: ordering) == 0b1011)
        #expect(v.load() == 0b0001)
        #expect(v.xorOriginal(0b0001, ordering: ordering) == 0b0001)
        #expect(v.load() == 0)
        // Results are Int32, as OSAtomic's: the top bit comes back negative.
        #expect(v.or(0x8000_0000, ordering: ordering) == Int32.min)
    }

    @Test(arguments: [RLAtomicOrdering.relaxed, .barrier])
    func int32Bits(ordering: RLAtomicOrdering) {
        let v = RLAtomicInt32(0)
        #expect(!v.testAndSet(bit: 31, ordering: ordering))
        #expect(v.load() == 1 << 24)  // byte 3's lowest bit on little-endian
        #expect(v.testAndSet(bit: 31, ordering: ordering))
        #expect(v.testAndClear(bit: 31, ordering: ordering))
        #expect(!v.testAndClear(bit: 31, ordering: ordering))
        #expect(v.load() == 0)
    }

    @Test(arguments: [RLAtomicOrdering.relaxed, .barrier])
    func int64(ordering: RLAtomicOrdering) {
        let v = RLAtomicInt64(1 << 40)
        #expect(v.load() == 1 << 40)
        #expect(v.add(1, ordering: ordering) == (1 << 40) + 1)
        #expect(v.increment(ordering: ordering) == (1 << 40) + 2)
        #expect(v.decrement(ordering: ordering) == (1 << 40) + 1)
        #expect(v.compareAndSwap(expected: (1 << 40) + 1, desired: -1, ordering: ordering))
        #expect(!v.compareAndSwap(expected: 0, desired: 5, ordering: ordering))
        v.store(0)
        #expect(!v.testAndSet(bit: 63, ordering: ordering))
        #expect(v.load() == 1 << 56)
        #expect(v.testAndClear(bit: 63, ordering: ordering))
        #expect(v.load() == 0)
    }

    @Test func bitArray() {
        let bits = RLAtomicBits(count: 100)
        #expect(bits.count == 100)
        #expect(!bits[0] && !bits[99])
        #expect(!bits.testAndSet(0))
        #expect(!bits.testAndSet(99, ordering: .relaxed))
        #expect(bits.testAndSet(99))
        #expect(bits[0] && bits[99] && !bits[1] && !bits[98])
        #expect(bits.testAndClear(0, ordering: .relaxed))
        #expect(!bits[0])
        #expect(!bits.testAndClear(0))
        RLAtomic.memoryBarrier()
    }

    @Test func bitOutOfRangeTraps() async {
        await #expect(processExitsWith: .failure) {
            _ = RLAtomicBits(count: 8).testAndSet(8)
        }
        await #expect(processExitsWith: .failure) {
            _ = RLAtomicInt32().testAndSet(bit: 32)
        }
    }

    @Test func everyThreadClaimsDistinctBits() {
        // 8 threads race to claim 800 bits; each bit goes to exactly one.
        let bits = RLAtomicBits(count: 800)
        let claimed = RLAtomicInt32()
        onThreads(8) { _ in
            for b in 0..<800 where !bits.testAndSet(b) { claimed.increment(ordering: .relaxed) }
        }
        #expect(claimed.load() == 800)
        #expect((0..<800).allSatisfy { bits[$0] })
    }

    @Test(arguments: [RLAtomicOrdering.relaxed, .barrier])
    func loadAndStore(ordering: RLAtomicOrdering) {
        let v32 = RLAtomicInt32(5)
        #expect(v32.load(ordering: ordering) == 5)
        v32.store(Int32.min, ordering: ordering)
        #expect(v32.load(ordering: ordering) == Int32.min)
        v32.store(-1, ordering: ordering)
        #expect(v32.load() == -1)
        let v64 = RLAtomicInt64(1 << 40)
        #expect(v64.load(ordering: ordering) == 1 << 40)
        v64.store(Int64.max, ordering: ordering)
        #expect(v64.load(ordering: ordering) == Int64.max)
        v64.store(-7, ordering: ordering)
        #expect(v64.load() == -7)
    }

    @Test func storeBarrierPublishes() {
        // Thread 1 writes a payload and publishes a sequence number with a
        // barrier store; thread 0 waits for it with barrier loads.
        let payload = RLAtomicInt64()
        let flag = RLAtomicInt32()
        let rounds: Int32 = 2000
        let mismatches = RLAtomicInt32()
        onThreads(2) { index in
            for i in 1...rounds {
                if index == 1 {
                    payload.store(Int64(i) * 3, ordering: .relaxed)
                    flag.store(2 * i - 1)
                    while flag.load() != 2 * i { sched_yield() }
                } else {
                    while flag.load() != 2 * i - 1 { sched_yield() }
                    if payload.load(ordering: .relaxed) != Int64(i) * 3 { mismatches.increment() }
                    flag.store(2 * i)
                }
            }
        }
        #expect(mismatches.load() == 0)
    }
}
