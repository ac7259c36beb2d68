import Testing
import SwiftThreads

/// The README's Swift example, with a shorter interval: it must compile
/// against the public API and do what the README says.
@Suite struct ReadmeExampleTests {
    final class Ticks: @unchecked Sendable {
        let lock = RLLock()   // guards `count`
        var count = 0
    }

    @Test func readmeSnippetRuns() throws {
        let ticks = Ticks()
        let thread = RLThread(returning: { () -> Int in
            ticks.lock.withLock { ticks.count = 0 }
            RLTimer.scheduledTimer(withTimeInterval: 0.01, repeats: true) { timer in
                let n = ticks.lock.withLock { () -> Int in
                    ticks.count += 1
                    return ticks.count
                }
                if n == 3 { timer.invalidate() }
            }
            // Returns once the timer is gone (nothing left in the mode) or
            // after the generous limit.
            RLRunLoop.current.run(until: RLTime.now + 30)
            return ticks.lock.withLock { ticks.count }
        })
        try thread.setJoinable(true)
        try thread.start()
        #expect(try thread.join(as: Int.self) == 3)
    }
}
