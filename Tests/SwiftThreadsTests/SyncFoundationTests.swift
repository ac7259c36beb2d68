// A file that imports Foundation and SwiftThreads together: every type name
// used here must resolve without ambiguity, and Dates convert to
// RLAbsoluteTime through timeIntervalSinceReferenceDate.
import Foundation
import SwiftThreads
import Testing

@Suite struct SyncFoundationTests {
    @Test func typesResolveNextToFoundations() throws {
        let rl = RLLock()
        let ns = NSLock()
        let cond = RLCondition()
        let nsCond = NSCondition()
        let conditionLock = RLConditionLock(condition: 1)
        let nsConditionLock = NSConditionLock(condition: 1)
        let recursive = RLRecursiveLock()
        let nsRecursive = NSRecursiveLock()
        let rw = RLReadWriteLock()
        let spin = RLSpinLock()
        let once = RLOnce()
        let counter = RLAtomicInt32()
        let bits = RLAtomicBits(count: 8)
        #expect(rl.withLock { 1 } == ns.withLock { 1 })
        #expect(cond.withLock { 2 } == nsCond.withLock { 2 })
        #expect(conditionLock.lock(whenCondition: 1))
        conditionLock.unlock(withCondition: 2)
        nsConditionLock.lock(whenCondition: 1)
        nsConditionLock.unlock(withCondition: 2)
        #expect(conditionLock.condition == nsConditionLock.condition)
        recursive.lock(); nsRecursive.lock()
        recursive.unlock(); nsRecursive.unlock()
        #expect(rw.withReadLock { true })
        #expect(spin.withLock { true })
        once.perform { counter.increment() }
        #expect(counter.load() == 1)
        #expect(!bits.testAndSet(3))
        let account = NSObject()
        #expect(synchronized(account) { 5 } == 5)
        let error: RLError? = nil
        #expect(error == nil)
    }

    @Test func datesConvert() {
        let lock = RLLock()
        let date = Date(timeIntervalSinceNow: 10)
        #expect(lock.lock(before: date.timeIntervalSinceReferenceDate))
        #expect(!onOtherThread { lock.lock(before: Date.distantPast.timeIntervalSinceReferenceDate) })
        #expect(lock.unlock())
        // RLTime.now is Date's clock.
        #expect(abs(RLTime.now - Date().timeIntervalSinceReferenceDate) < 60)
        #expect(RLTime.distantFuture == Date.distantFuture.timeIntervalSinceReferenceDate)
        let cond = RLCondition()
        cond.lock()
        #expect(!cond.wait(until: Date().timeIntervalSinceReferenceDate))
        cond.unlock()
    }

    @Test func foundationThreadsAndOurLocks() {
        // Foundation's Thread on one side, our lock and condition on the other.
        let state = RLCondition()
        let box = SharedBox((started: 0, done: 0))
        for _ in 0..<4 {
            Thread.detachNewThread {
                state.withLock {
                    box.value.started += 1
                    box.value.done += 1
                    state.broadcast()
                }
            }
        }
        state.withLock {
            while box.value.done < 4 { state.wait() }
        }
        #expect(state.withLock { box.value.started } == 4)
    }

    @Test func distributedLockWithFileManagerPaths() throws {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("SwiftThreadsTests-\(ProcessInfo.processInfo.processIdentifier)-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let lock = try RLDistributedLock(path: dir.appendingPathComponent("x.lock").path)
        #expect(lock.tryLock())
        let date = try #require(lock.lockDate)
        #expect(abs(Date(timeIntervalSinceReferenceDate: date).timeIntervalSinceNow) < 600)
        #expect(lock.unlock())
    }
}
