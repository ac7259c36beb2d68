import Testing
import SwiftThreads

/// 8 threads x `stressOpsPerThread` increments of one plain counter per
/// lock kind; the total must come out exact. Serialized so that the suites
/// do not pile 8 threads per lock kind onto the same cores at once.
@Suite(.serialized) struct SyncStressTests {
    private func hammer(_ lock: some RLLocking) -> Int {
        let counter = SharedBox(0)
        let n = stressOpsPerThread
        onThreads(stressThreads) { _ in
            for _ in 0..<n {
                lock.lock()
                counter.value += 1
                lock.unlock()
            }
        }
        return counter.value
    }

    private var expected: Int { stressThreads * stressOpsPerThread }

    @Test func lock() { #expect(hammer(RLLock()) == expected) }
    @Test func recursiveLock() { #expect(hammer(RLRecursiveLock()) == expected) }
    @Test func readWriteLockWriters() { #expect(hammer(RLReadWriteLock()) == expected) }
    @Test func condition() { #expect(hammer(RLCondition()) == expected) }
    @Test func conditionLock() { #expect(hammer(RLConditionLock()) == expected) }
    @Test func spinLock() { #expect(hammer(RLSpinLock()) == expected) }

    @Test func synchronizedBlocks() {
        final class Target {}
        let target = SharedBox(Target())
        let counter = SharedBox(0)
        let n = stressOpsPerThread
        onThreads(stressThreads) { _ in
            let object = target.value
            for _ in 0..<n {
                synchronized(object) { counter.value += 1 }
            }
        }
        #expect(counter.value == expected)
    }

    @Test func readWriteLockMixed() {
        // Half the threads write, half read and check they never see a
        // half-done write (the two fields always agree).
        let rw = RLReadWriteLock()
        let pair = SharedBox((a: 0, b: 0))
        let torn = RLAtomicInt32()
        let n = stressOpsPerThread
        onThreads(stressThreads) { i in
            for _ in 0..<n {
                if i % 2 == 0 {
                    rw.writeLock()
                    pair.value.a += 1
                    pair.value.b += 1
                    rw.unlock()
                } else {
                    rw.readLock()
                    if pair.value.a != pair.value.b { torn.increment(ordering: .relaxed) }
                    rw.unlock()
                }
            }
        }
        #expect(pair.value.a == expected / 2)
        #expect(pair.value.b == expected / 2)
        #expect(torn.load() == 0)
    }

    @Test func conditionLockHandOff() {
        // Producer/consumer through the condition: every item passes once.
        let queue = ThreadSafeQueue<Int>()
        let n = stressOpsPerThread / 10
        let sums = (0..<stressThreads / 2).map { _ in SharedBox(0) }  // one per consumer
        onThreads(stressThreads) { i in
            if i % 2 == 0 {
                for k in 0..<n { queue.enqueue(k) }
            } else {
                var sum = 0
                for _ in 0..<n { sum += queue.dequeue() }
                sums[i / 2].value = sum
            }
        }
        #expect(sums.reduce(0) { $0 + $1.value } == (stressThreads / 2) * (n * (n - 1) / 2))
    }

    @Test func atomicInt32() {
        let v = RLAtomicInt32()
        let n = stressOpsPerThread
        onThreads(stressThreads) { i in
            for _ in 0..<n {
                if i % 2 == 0 { v.increment(ordering: .relaxed) } else { v.add(1) }
            }
        }
        #expect(v.load() == Int32(expected))
    }

    @Test func atomicInt64CompareAndSwapLoop() {
        let v = RLAtomicInt64()
        let n = stressOpsPerThread
        onThreads(stressThreads) { _ in
            for _ in 0..<n {
                var old = v.load()
                while !v.compareAndSwap(expected: old, desired: old + 1) { old = v.load() }
            }
        }
        #expect(v.load() == Int64(expected))
    }
}
