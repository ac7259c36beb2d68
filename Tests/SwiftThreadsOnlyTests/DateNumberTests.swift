// A target that depends on SwiftThreads alone: with SwiftThreadsFoundation
// absent, the date-typed properties are plain `RLAbsoluteTime` numbers and
// every use below compiles without naming a type (compare
// SwiftThreadsTests/DatePropertyTests.swift, where they are `Date`s).
import SwiftThreads
import Testing

@Suite struct DateNumberTests {
    @Test func timerFireDateIsANumber() {
        let timer = RLTimer(fire: RLTime.now + 60, interval: 0, repeats: false) { _ in }
        let date = timer.fireDate
        #expect(date.isFinite)
        #expect(abs(date - (RLTime.now + 60)) < 30)
        timer.fireDate = date + 1
        #expect(abs(timer.fireDate - date - 1) < 1e-6)
        timer.invalidate()
        #expect(timer.fireDate == 0)
    }

    @Test func lockDateIsANumber() throws {
        let path = "/tmp/SwiftThreadsOnlyTests-\(RLTime.now).lock"
        let lock = try RLDistributedLock(path: path)
        #expect(lock.lockDate == nil)
        #expect(lock.tryLock())
        let date = try #require(lock.lockDate)
        #expect(abs(date - RLTime.now) < 600)
        #expect(lock.unlock())
    }
}
