import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#endif

/// Loop health from Swift: the slow-callout report through a closure, a
/// loop's statistics, its periodic snapshots. The handler is the
/// process's, so the suite runs its tests one at a time, each on a fresh
/// loop thread with a threshold of that loop's own.
@Suite(.serialized) struct RunLoopHealthTests {
    @Test func slowTimerReportedToTheClosure() {
        let reports = LoopEventLog<RLSlowCalloutReport>()
        RLRunLoop.setSlowCalloutHandler { reports.append($0) }
        defer { RLRunLoop.setSlowCalloutHandler(nil) }
        let loopDescription = onFreshLoopThread { () -> String in
            let loop = RLRunLoop.current
            loop.slowCalloutThreshold = .milliseconds(2)
            #expect(loop.slowCalloutThreshold == .milliseconds(2))
            RLTimer.scheduledTimer(withTimeInterval: 0.001, repeats: false) { _ in usleep(20_000) }
            _ = try? loop.run(mode: .default, for: 30)
            loop.slowCalloutThreshold = nil
            #expect(loop.slowCalloutThreshold == nil)
            return "\(ObjectIdentifier(loop))"
        }
        let seen = reports.values
        #expect(seen.count == 1)
        if let r = seen.first {
            #expect(r.kind == .timer)
            #expect(r.mode == .default)
            #expect(r.duration >= .milliseconds(20))
            #expect(r.threshold == .milliseconds(2))
            #expect(r.objectDescription.contains("RLRunLoopTimer"))
            #expect("\(ObjectIdentifier(r.runLoop))" == loopDescription)
        }
    }

    @Test func fastCalloutNotReported() {
        let reports = LoopEventLog<RLSlowCalloutReport>()
        RLRunLoop.setSlowCalloutHandler { reports.append($0) }
        defer { RLRunLoop.setSlowCalloutHandler(nil) }
        onFreshLoopThread {
            let loop = RLRunLoop.current
            loop.slowCalloutThreshold = .seconds(5)
            RLTimer.scheduledTimer(withTimeInterval: 0.001, repeats: false) { _ in }
            _ = try? loop.run(mode: .default, for: 30)
        }
        #expect(reports.count == 0)
    }

    @Test func statisticsCountAScriptedLoop() {
        let (first, afterReset) = onFreshLoopThread { () -> (RLRunLoopStatistics, RLRunLoopStatistics) in
            let loop = RLRunLoop.current
            loop.isTimingEnabled = true
            #expect(loop.isTimingEnabled)
            loop.resetStatistics()
            for _ in 0..<3 {
                RLTimer.scheduledTimer(withTimeInterval: 0.002, repeats: false) { _ in }
                _ = try? loop.run(mode: .default, for: 30)
            }
            let first = loop.statistics
            loop.resetStatistics()
            return (first, loop.statistics)
        }
        #expect(first.callouts[.timer] == 3)
        #expect(first.sleeps == 3)
        #expect(first.wakeUps[.timer] == 3)
        #expect(first.isTimingEnabled)
        #expect(first.calloutDuration.count == 3)
        #expect(first.timerLateness.count == 3)
        #expect(first.timeAsleep > .zero)
        #expect(afterReset.passes == 0)
        #expect(afterReset.callouts[.timer] == 0)
    }

    @Test func periodicSnapshots() async {
        let loop = RLRunLoop.main
        var seen = 0
        for await snapshot in loop.statisticsUpdates(every: .milliseconds(10)) {
            #expect(snapshot.passes >= 0)
            seen += 1
            if seen == 3 { break }
        }
        #expect(seen == 3)
    }

    @Test func negativeThresholdRefused() {
        onFreshLoopThread {
            let loop = RLRunLoop.current
            loop.slowCalloutThreshold = .milliseconds(7)
            loop.slowCalloutThreshold = .milliseconds(-1)
            #expect(loop.slowCalloutThreshold == .milliseconds(7))
            loop.slowCalloutThreshold = nil
        }
        #expect(RLCalloutKind.mainQueue.description == "main queue")
        #expect(RLWakeUpCause.explicit.description == "explicit")
    }
}
