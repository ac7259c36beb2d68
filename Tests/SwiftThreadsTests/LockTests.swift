import Testing
import SwiftThreads

@Suite struct LockTests {
    @Test func lockUnlockAndTryLock() {
        let lock = RLLock()
        #expect(lock.lock())
        #expect(lock.unlock())
        #expect(lock.tryLock())
        #expect(lock.unlock())
    }

    @Test func tryLockFailsWhileAnotherThreadHoldsIt() {
        let lock = RLLock()
        lock.lock()
        let (took, code) = onOtherThread { (lock.tryLock(), lastCode) }
        #expect(!took)
        #expect(code == .busy)
        #expect(lock.unlock())
        #expect(onOtherThread { lock.tryLock() && lock.unlock() })
    }

    @Test func relockByHolderIsReportedNotDeadlocked() {
        let lock = RLLock()
        lock.lock()
        RLError.clear()
        #expect(!lock.lock())
        #expect(lastCode == .wouldDeadlock)
        #expect(!lock.tryLock())
        #expect(lastCode == .busy)
        // Still held exactly once: one unlock frees it, a second fails.
        #expect(lock.unlock())
        #expect(!lock.unlock())
        #expect(lastCode == .notLocked)
        #expect(lock.tryLock())
        #expect(lock.unlock())
    }

    @Test func unlockByNonOwnerFailsAndChangesNothing() {
        let lock = RLLock()
        lock.lock()
        let (unlocked, code) = onOtherThread { (lock.unlock(), lastCode) }
        #expect(!unlocked)
        #expect(code == .notOwner)
        #expect(!onOtherThread { lock.tryLock() })
        #expect(lock.unlock())
    }

    @Test func checkedVariantsThrowTheLibraryError() {
        let lock = RLLock()
        #expect(throws: RLError.self) { try lock.checkedUnlock() }
        do {
            try lock.checkedUnlock()
        } catch {
            #expect(error.code == .notLocked)
            #expect(!error.message.isEmpty)
        }
        #expect(throws: Never.self) { try lock.checkedLock() }
        do {
            try lock.checkedLock()
            Issue.record("relock succeeded")
        } catch {
            #expect(error.code == .wouldDeadlock)
        }
        #expect(throws: Never.self) { try lock.checkedUnlock() }
    }

    @Test func lockBeforeDate() {
        let lock = RLLock()
        #expect(lock.lock(before: RLTime.now + 10))
        let (took, code) = onOtherThread { (lock.lock(before: RLTime.now), lastCode) }
        #expect(!took)
        #expect(code == .timedOut)
        let (tookPast, codePast) = onOtherThread { (lock.lock(timeout: .milliseconds(1)), lastCode) }
        #expect(!tookPast)
        #expect(codePast == .timedOut)
        #expect(lock.unlock())
        #expect(lock.lock(timeout: .seconds(10)))
        #expect(lock.unlock())
        #expect(!lock.lock(before: .nan))
        #expect(lastCode == .invalidArgument)
    }

    @Test func lockBeforeDateWaitsForTheHolder() {
        let lock = RLLock()
        let held = RLConditionLock(condition: 0)
        let got = SharedBox(false)
        onThreads(2) { i in
            if i == 0 {
                lock.lock()
                held.lock(); held.unlock(withCondition: 1)
                held.lock(whenCondition: 2); held.unlock()
                lock.unlock()
            } else {
                held.lock(whenCondition: 1); held.unlock(withCondition: 2)
                got.value = lock.lock(before: RLTime.distantFuture)
                lock.unlock()
            }
        }
        #expect(got.value)
    }

    @Test func names() {
        let lock = RLLock(name: "accounts")
        #expect(lock.name == "accounts")
        lock.name = "ledger"
        #expect(lock.name == "ledger")
        lock.name = nil
        #expect(lock.name == nil)
        #expect(RLLock().name == nil)
    }

    @Test func withLockReturnsAndReleasesOnThrow() {
        let lock = RLLock()
        #expect(lock.withLock { 42 } == 42)
        #expect(throws: TestFailure.self) {
            try lock.withLock { throw TestFailure() }
        }
        #expect(onOtherThread { lock.tryLock() && lock.unlock() })
    }

    @Test func droppingAHeldLockIsClean() {
        // The wrapper unlocks for its own thread before releasing.
        do {
            let lock = RLLock()
            lock.lock()
        }
        do {
            let lock = RLRecursiveLock()
            lock.lock(); lock.lock()
        }
        RLError.clear()
    }

    @Test func withLockTrapsOnRelock() async {
        await #expect(processExitsWith: .failure) {
            let lock = RLLock()
            lock.withLock { lock.withLock {} }
        }
    }

    @Test func asRLLocking() {
        let locks: [any RLLocking] = [RLLock(), RLRecursiveLock(), RLReadWriteLock(), RLCondition(),
                                      RLConditionLock(), RLSpinLock()]
        for lock in locks {
            #expect(lock.withLock { 7 } == 7)
            #expect(!lock.unlock())
            #expect(lastCode == .notLocked)
        }
    }
}

@Suite struct RecursiveLockTests {
    @Test func nestsAndCounts() {
        let lock = RLRecursiveLock(name: "tree")
        #expect(lock.name == "tree")
        #expect(lock.recursionCount == 0)
        #expect(lock.lock())
        #expect(lock.lock())
        #expect(lock.tryLock())
        #expect(lock.lock(before: RLTime.now))
        #expect(lock.recursionCount == 4)
        #expect(!onOtherThread { lock.tryLock() })
        #expect(onOtherThread { lock.recursionCount } == 0)
        for _ in 0..<4 { #expect(lock.unlock()) }
        #expect(lock.recursionCount == 0)
        #expect(!lock.unlock())
        #expect(lastCode == .notLocked)
        #expect(onOtherThread { lock.tryLock() && lock.unlock() })
    }

    @Test func nonOwnerAndTimeouts() {
        let lock = RLRecursiveLock()
        lock.lock()
        let (unlocked, code) = onOtherThread { (lock.unlock(), lastCode) }
        #expect(!unlocked)
        #expect(code == .notOwner)
        let (took, timeoutCode) = onOtherThread { (lock.lock(timeout: .milliseconds(1)), lastCode) }
        #expect(!took)
        #expect(timeoutCode == .timedOut)
        lock.unlock()
        lock.name = nil
        #expect(lock.name == nil)
    }

    @Test func withLockNests() {
        let lock = RLRecursiveLock()
        let depth = lock.withLock { lock.withLock { lock.recursionCount } }
        #expect(depth == 2)
        #expect(lock.recursionCount == 0)
    }
}
