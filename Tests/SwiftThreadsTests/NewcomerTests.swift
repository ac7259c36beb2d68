// What a newcomer from Foundation writes: Foundation, SwiftThreads and
// SwiftThreadsFoundation imported together (no call may be ambiguous), the
// `Date` overloads, a thread made to return a value, and waiting in a test
// for work on our run loop, with Swift Testing and with XCTest.
import Foundation
import SwiftThreads
import SwiftThreadsFoundation
import Testing
import XCTest

@Suite struct FoundationDateTests {
    @Test func dateOverloadsReachTheSameTimes() throws {
        let lock = RLLock()
        #expect(lock.lock(before: Date()))          // free: taken at once
        #expect(!RLThread(returning: { lock.lock(before: Date(timeIntervalSinceNow: 0.01)) }).joinResult())
        lock.unlock()
        let recursive = RLRecursiveLock()
        #expect(recursive.lock(before: .distantFuture))
        recursive.unlock()

        let condition = RLCondition()
        #expect(condition.lock(before: Date.distantFuture))
        #expect(!condition.wait(until: Date()))     // already past: times out
        condition.unlock()

        let conditionLock = RLConditionLock(condition: 1)
        #expect(!conditionLock.lock(whenCondition: 2, before: Date()))
        #expect(conditionLock.lock(whenCondition: 1, before: Date.distantFuture))
        conditionLock.unlock(withCondition: 2)
        #expect(conditionLock.lock(before: Date()))
        conditionLock.unlock()

        let rw = RLReadWriteLock()
        #expect(rw.readLock(before: Date()))
        rw.unlock()
        #expect(rw.writeLock(before: Date()))
        rw.unlock()

        let fired = RLAtomicInt32(0)
        let timer = RLTimer(fire: Date(), interval: 0, repeats: false) { _ in _ = fired.add(1) }
        RLRunLoop.current.add(timer, forMode: .default)
        #expect(abs(timer.fireDateAsDate.timeIntervalSinceNow) < 3600)
        #expect(RLRunLoop.current.limitDate(forMode: .default) != nil)
        RLRunLoop.current.run(until: Date(timeIntervalSinceNow: 5))   // returns when the timer is gone
        #expect(fired.load() == 1)
        #expect(RLRunLoop.current.limitDate(forMode: .default) == nil)
        #expect(!RLRunLoop.current.run(mode: .default, before: Date()))   // nothing left to run

        let start = Date()
        RLThread.sleep(until: start.addingTimeInterval(0.001))
        #expect(Date() >= start)
        #expect(Date(rlAbsoluteTime: start.rlAbsoluteTime) == start)
        #expect(abs(RLTime.nowDate.timeIntervalSince(Date())) < 60)
    }

    @Test func threadReturningIsJoinable() throws {
        let thread = RLThread(returning: { 6 * 7 })
        #expect(thread.isJoinable)
        try thread.start()
        #expect(try thread.join(as: Int.self) == 42)
        #expect(!RLThread(block: {}).isJoinable)    // Foundation's Thread(block:): detached
    }
}

extension RLThread {
    /// Starts a `RLThread(returning:)` thread and joins it (test shorthand).
    fileprivate func joinResult() -> Bool {
        (try? start()) != nil && ((try? join(as: Bool.self)) ?? nil) == true
    }
}

final class Shared: @unchecked Sendable {
    let lock = RLLock()   // guards `done`
    var done = false
    func set() { lock.withLock { done = true } }
    var isDone: Bool { lock.withLock { done } }
}

@Suite struct RunUntilTests {
    // The example of RLRunLoopTesting.swift and the README.
    @Test func timerFires() {
        let fired = RLAtomicInt32(0)
        RLTimer.scheduledTimer(withTimeInterval: 0.01, repeats: false) { _ in _ = fired.add(1) }
        #expect(RLRunLoop.current.runUntil(timeout: .seconds(5)) { fired.load() == 1 })
    }

    @Test func performFromAnotherThread() throws {
        let shared = Shared()
        let loop = RLRunLoop.current
        try RLThread.detachNewThread { _ = loop.perform { shared.set() } }
        #expect(RLRunLoop.current.runUntil(timeout: .seconds(30)) { shared.isDone })
    }

    @Test func changedByAnotherThreadWithNothingInTheMode() throws {
        let shared = Shared()
        try RLThread.detachNewThread { shared.set() }   // no wake-up of this loop
        #expect(RLRunLoop.current.runUntil(timeout: .seconds(30), mode: RLRunLoop.Mode("empty")) { shared.isDone })
    }

    @Test func timesOutWhenTheConditionNeverHolds() {
        var checks = 0
        #expect(!RLRunLoop.current.runUntil(timeout: .milliseconds(20)) { checks += 1; return false })
        #expect(checks >= 2)
    }

    @Test func trueAtOnceRunsNothing() {
        let fired = RLAtomicInt32(0)
        let timer = RLTimer(fire: RLTime.now, interval: 0, repeats: false) { _ in _ = fired.add(1) }
        RLRunLoop.current.add(timer, forMode: .default)
        #expect(RLRunLoop.current.runUntil { true })
        #expect(fired.load() == 0)
        timer.invalidate()
    }

    @Test func anotherThreadsLoopRunsNothing() throws {
        let main = RLRunLoop.current
        let thread = RLThread(returning: { () -> Bool in
            var checks = 0
            let result = main.runUntil(timeout: .seconds(5)) { checks += 1; return false }
            return !result && checks == 1
        })
        try thread.start()
        #expect(try thread.join(as: Bool.self) == true)
    }
}

final class RunUntilXCTests: XCTestCase {
    // The XCTest example of RLRunLoopTesting.swift and the README.
    func testTimerFires() {
        let fired = RLAtomicInt32(0)
        RLTimer.scheduledTimer(withTimeInterval: 0.01, repeats: false) { _ in _ = fired.add(1) }
        XCTAssertTrue(RLRunLoop.current.runUntil(timeout: .seconds(5)) { fired.load() == 1 })
    }
}
