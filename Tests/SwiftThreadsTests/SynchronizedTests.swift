import Testing
import SwiftThreads

/// `balance` is only touched inside `synchronized(account)`.
private final class Account: @unchecked Sendable {
    var balance = 0
}

@Suite struct SynchronizedTests {
    @Test func returnsTheBodysValueAndIsRecursive() {
        let account = Account()
        let v = synchronized(account) {
            synchronized(account) {
                account.balance += 10
                return account.balance
            }
        }
        #expect(v == 10)
        #expect(!RLSync.isHeldByCurrentThread(account))
    }

    @Test func releasesOnThrow() {
        let account = Account()
        #expect(throws: TestFailure.self) {
            try synchronized(account) {
                #expect(RLSync.isHeldByCurrentThread(account))
                throw TestFailure()
            }
        }
        #expect(!RLSync.isHeldByCurrentThread(account))
        #expect(onOtherThread { RLSync.tryEnter(account) && RLSync.exit(account) })
    }

    @Test func excludesOtherThreads() {
        let account = Account()
        synchronized(account) {
            #expect(RLSync.isHeldByCurrentThread(account))
            #expect(!onOtherThread { RLSync.tryEnter(account) })
            #expect(!onOtherThread { RLSync.isHeldByCurrentThread(account) })
            let (exited, code) = onOtherThread { (RLSync.exit(account), lastCode) }
            #expect(!exited)
            #expect(code == .notOwner)
        }
    }

    @Test func unbalancedCalls() {
        let account = Account()
        #expect(!RLSync.exit(account))
        #expect(lastCode == .notLocked)
        #expect(RLSync.enter(account))
        #expect(RLSync.tryEnter(account))
        #expect(RLSync.exit(account))
        #expect(RLSync.isHeldByCurrentThread(account))
        #expect(RLSync.exit(account))
        #expect(!RLSync.exit(account))
        #expect(lastCode == .notLocked)
    }

    @Test func distinctObjectsDoNotExcludeEachOther() {
        let a = Account(), b = Account()
        synchronized(a) {
            #expect(onOtherThread { synchronized(b) { true } })
        }
    }
}

@Suite struct OnceTests {
    @Test func runsExactlyOnceAcrossThreads() {
        let once = RLOnce()
        let runs = RLAtomicInt32()
        let sawDone = RLAtomicInt32()
        let data = SharedBox(0)
        onThreads(8) { _ in
            let ok = once.perform {
                runs.increment()
                data.value = 99
            }
            // Every caller returns after the body finished and sees its writes.
            if ok && data.value == 99 { sawDone.increment() }
        }
        #expect(runs.load() == 1)
        #expect(sawDone.load() == 8)
        #expect(once.perform { runs.increment() })
        #expect(runs.load() == 1)
    }

    @Test func nestedPerformReportsDeadlock() {
        let once = RLOnce()
        let inner = SharedBox<(Bool, RLError.Code)?>(nil)
        #expect(once.perform {
            inner.value = (once.perform {}, lastCode)
        })
        #expect(inner.value?.0 == false)
        #expect(inner.value?.1 == .wouldDeadlock)
    }

    @Test func aThrowingBodyCountsAsTheRun() {
        let once = RLOnce()
        #expect(throws: TestFailure.self) { try once.perform { throw TestFailure() } }
        var ranAgain = false
        #expect(once.perform { ranAgain = true })
        #expect(!ranAgain)
    }
}
