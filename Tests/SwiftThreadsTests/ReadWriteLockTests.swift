#if canImport(Glibc)
import Glibc
#endif
import Testing
import SwiftThreads

@Suite struct ReadWriteLockTests {
    @Test func readersShareWritersExclude() {
        let rw = RLReadWriteLock(name: "table")
        #expect(rw.name == "table")
        #expect(rw.readLock())
        #expect(onOtherThread { rw.tryReadLock() && rw.unlock() })
        let (wrote, code) = onOtherThread { (rw.tryWriteLock(), lastCode) }
        #expect(!wrote)
        #expect(code == .busy)
        let (timed, timedCode) = onOtherThread { (rw.writeLock(before: RLTime.now), lastCode) }
        #expect(!timed)
        #expect(timedCode == .timedOut)
        #expect(rw.unlock())
        #expect(rw.writeLock())
        let (read, readCode) = onOtherThread { (rw.tryReadLock(), lastCode) }
        #expect(!read)
        #expect(readCode == .busy)
        let (readTimed, readTimedCode) = onOtherThread { (rw.readLock(before: RLTime.now), lastCode) }
        #expect(!readTimed)
        #expect(readTimedCode == .timedOut)
        #expect(rw.unlock())
        #expect(rw.readLock(before: RLTime.distantFuture))
        #expect(rw.unlock())
        #expect(rw.writeLock(before: RLTime.distantFuture))
        #expect(rw.unlock())
    }

    @Test func misuseIsReported() {
        let rw = RLReadWriteLock()
        #expect(!rw.unlock())
        #expect(lastCode == .notLocked)
        rw.readLock()
        #expect(!rw.writeLock())  // upgrade would wait for ourselves
        #expect(lastCode == .wouldDeadlock)
        let (unlocked, code) = onOtherThread { (rw.unlock(), lastCode) }
        #expect(!unlocked)
        #expect(code == .notOwner)
        #expect(rw.readLock())  // a reader may read again
        #expect(rw.unlock())
        #expect(rw.unlock())
        rw.writeLock()
        #expect(!rw.readLock())
        #expect(lastCode == .wouldDeadlock)
        #expect(!rw.lock())
        #expect(lastCode == .wouldDeadlock)
        #expect(rw.unlock())
        #expect(!rw.unlock())
    }

    @Test func withReadAndWriteLock() {
        let rw = RLReadWriteLock()
        let value = SharedBox(0)
        rw.withWriteLock { value.value = 5 }
        #expect(rw.withReadLock { rw.withReadLock { value.value } } == 5)
        #expect(throws: TestFailure.self) { try rw.withWriteLock { throw TestFailure() } }
        #expect(throws: TestFailure.self) { try rw.withReadLock { throw TestFailure() } }
        #expect(rw.tryWriteLock())
        #expect(rw.unlock())
    }

    @Test func aWaitingWriterHoldsBackNewReaders() {
        // A reader holds the lock; a writer queues behind it. From then on
        // a new reader (this thread) must not get in, or writers could starve.
        let rw = RLReadWriteLock()
        let gate = RLConditionLock(condition: 0)
        let writerGot = SharedBox(false)
        onThreads(3) { i in
            switch i {
            case 0:  // the reader
                rw.readLock()
                gate.lock(); gate.unlock(withCondition: 1)
                gate.lock(whenCondition: 2); gate.unlock()
                rw.unlock()
            case 1:  // the writer
                gate.lock(whenCondition: 1); gate.unlock()
                writerGot.value = rw.writeLock()
                rw.unlock()
            default:  // a late reader, polling until the writer queues
                gate.lock(whenCondition: 1); gate.unlock()
                while rw.tryReadLock() {
                    rw.unlock()
                    sched_yield()
                }
                gate.lock(); gate.unlock(withCondition: 2)
            }
        }
        #expect(writerGot.value)
    }

    @Test func readersRunTogether() {
        // Every reader holds the lock until all readers hold it at once.
        let rw = RLReadWriteLock()
        let count = RLAtomicInt32()
        let readers: Int32 = 4
        onThreads(Int(readers)) { _ in
            rw.withReadLock {
                count.increment()
                while count.load() < readers { sched_yield() }
            }
        }
        #expect(count.load() == readers)
    }
}

@Suite struct SpinLockTests {
    @Test func lockTryUnlock() {
        let spin = RLSpinLock()
        #expect(!spin.isLocked)
        #expect(spin.lock())
        #expect(spin.isLocked)
        #expect(!spin.tryLock())
        #expect(!onOtherThread { spin.tryLock() })
        #expect(spin.unlock())
        #expect(!spin.isLocked)
        #expect(spin.tryLock())
        #expect(spin.unlock())
    }

    @Test func unlockingAFreeLockFails() {
        let spin = RLSpinLock()
        #expect(!spin.unlock())
        #expect(lastCode == .notLocked)
        #expect(!spin.isLocked)
        #expect(spin.withLock { 3 } == 3)
        #expect(throws: TestFailure.self) { try spin.withLock { throw TestFailure() } }
        #expect(!spin.isLocked)
    }

    @Test func onlyTheHolderMayUnlockAndRelockFails() {
        // Unlike OSSpinLock the holder is recorded: another thread's unlock
        // is refused, and relocking from the holder fails instead of
        // spinning forever.
        let spin = RLSpinLock()
        #expect(spin.lock())
        #expect(onOtherThread { !spin.unlock() && lastCode == .notOwner })
        #expect(onOtherThread { !spin.tryLock() && lastCode == .busy })
        #expect(spin.isLocked)
        #expect(!spin.lock())
        #expect(lastCode == .wouldDeadlock)
        #expect(!spin.tryLock())
        #expect(lastCode == .busy)
        #expect(spin.unlock())
        #expect(!spin.isLocked)
    }
}
