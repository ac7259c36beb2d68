import Testing
import SwiftThreads

@Suite struct ConditionTests {
    @Test func waitNeedsTheLock() {
        let cond = RLCondition()
        #expect(!cond.wait())
        #expect(lastCode == .notLocked)
        #expect(!cond.wait(until: RLTime.now + 10))
        #expect(lastCode == .notLocked)
        cond.lock()
        let (waited, code) = onOtherThread { (cond.wait(), lastCode) }
        #expect(!waited)
        #expect(code == .notOwner)
        cond.unlock()
    }

    @Test func timedWaitTimesOutHoldingTheLock() {
        let cond = RLCondition()
        cond.lock()
        #expect(!cond.wait(until: RLTime.now - 1))
        #expect(lastCode == .timedOut)
        #expect(!cond.wait(timeout: .milliseconds(1)))
        #expect(lastCode == .timedOut)
        // Still held by us: another thread cannot take it, we can release it.
        #expect(!onOtherThread { cond.tryLock() })
        #expect(cond.unlock())
    }

    @Test func lockingVocabulary() {
        let cond = RLCondition(name: "ready")
        #expect(cond.name == "ready")
        cond.name = "go"
        #expect(cond.name == "go")
        #expect(cond.tryLock())
        #expect(!cond.lock())
        #expect(lastCode == .wouldDeadlock)
        let (took, code) = onOtherThread { (cond.lock(before: RLTime.now), lastCode) }
        #expect(!took)
        #expect(code == .timedOut)
        #expect(cond.unlock())
        #expect(cond.lock(before: RLTime.distantFuture))
        #expect(cond.unlock())
        #expect(!cond.unlock())
        #expect(lastCode == .notLocked)
    }

    @Test func signalWithoutWaitersSucceeds() {
        let cond = RLCondition()
        #expect(cond.signal())
        #expect(cond.broadcast())
        cond.withLock {
            #expect(cond.signal())
            #expect(cond.broadcast())
        }
    }

    @Test func signalWakesAWaiterThatSeesThePredicate() {
        let cond = RLCondition()
        let state = SharedBox((ready: false, seen: 0))
        onThreads(2) { i in
            if i == 0 {
                cond.withLock {
                    while !state.value.ready { cond.wait() }
                    state.value.seen = 42
                }
            } else {
                cond.withLock {
                    state.value.ready = true
                    cond.signal()
                }
            }
        }
        #expect(state.value.seen == 42)
    }

    @Test func timedWaitSucceedsWhenSignalled() {
        let cond = RLCondition()
        let state = SharedBox((ready: false, result: false))
        onThreads(2) { i in
            if i == 0 {
                cond.withLock {
                    var ok = true
                    while !state.value.ready && ok { ok = cond.wait(until: RLTime.distantFuture) }
                    state.value.result = ok && state.value.ready
                }
            } else {
                cond.withLock {
                    state.value.ready = true
                    cond.signal()
                }
            }
        }
        #expect(state.value.result)
    }

    @Test func broadcastWakesEveryWaiter() {
        let cond = RLCondition()
        let state = SharedBox((waiting: 0, go: false, woken: 0))
        let waiters = 6
        onThreads(waiters + 1) { i in
            if i < waiters {
                cond.withLock {
                    state.value.waiting += 1
                    cond.broadcast()  // tell the broadcaster
                    while !state.value.go { cond.wait() }
                    state.value.woken += 1
                }
            } else {
                cond.withLock {
                    while state.value.waiting < waiters { cond.wait() }
                    state.value.go = true
                    cond.broadcast()
                }
            }
        }
        #expect(state.value.woken == waiters)
    }

    @Test func pingPong() {
        let cond = RLCondition()
        let turn = SharedBox((turn: 0, rounds: [0, 0]))
        let rounds = 2000
        onThreads(2) { me in
            for _ in 0..<rounds {
                cond.withLock {
                    while turn.value.turn != me { cond.wait() }
                    turn.value.rounds[me] += 1
                    turn.value.turn = 1 - me
                    cond.signal()
                }
            }
        }
        #expect(turn.value.rounds == [rounds, rounds])
        #expect(turn.value.turn == 0)
    }
}
