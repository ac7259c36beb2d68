import Metrics
import MetricsTestKit
import SwiftThreads
import SwiftThreadsMetrics
import Testing

/// The exporter reports a loop's statistics through a test metrics factory:
/// counters grow by what the loop did between updates, gauges carry the
/// times and percentiles.
@Suite struct RunLoopMetricsTests {
    @Test func countersAndGaugesFromALoop() throws {
        let metrics = TestMetrics()
        let thread = RLThread(returning: { () -> [Int64] in
            let loop = RLRunLoop.current
            loop.isTimingEnabled = true
            let exporter = RLRunLoopMetrics(loop: loop, name: "worker-1", factory: metrics)
            func runTimers(_ n: Int) {
                for _ in 0..<n {
                    RLTimer.scheduledTimer(withTimeInterval: 0.001, repeats: false) { _ in }
                    _ = try? loop.run(mode: .default, for: 30)
                }
            }
            runTimers(3)
            exporter.update()
            let afterThree = metrics.counterTotal(label: "runloop_callouts",
                                                  dimensions: [("loop", "worker-1"), ("kind", "timer")])
            runTimers(2)
            exporter.update()
            let afterFive = metrics.counterTotal(label: "runloop_callouts",
                                                 dimensions: [("loop", "worker-1"), ("kind", "timer")])
            return [afterThree, afterFive]
        })
        try thread.start()
        let counts = try thread.join(as: [Int64].self)
        // Three, then two more: the counter grows by what was added.
        #expect(counts == [3, 5])
        #expect(metrics.counterTotal(label: "runloop_passes", dimensions: [("loop", "worker-1")]) >= 5)
        #expect(metrics.counterTotal(label: "runloop_wakeups",
                                     dimensions: [("loop", "worker-1"), ("cause", "timer")]) == 5)
        let p99 = try metrics.expectGauge("runloop_callout_duration_seconds",
                                          [("loop", "worker-1"), ("quantile", "0.99")])
        #expect(p99.lastValue != nil)
        let asleep = try metrics.expectGauge("runloop_time_asleep_seconds", [("loop", "worker-1")])
        #expect((asleep.lastValue ?? 0) > 0)
    }
}
