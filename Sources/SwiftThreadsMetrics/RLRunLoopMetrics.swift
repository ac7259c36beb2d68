// RLRunLoopMetrics.swift — a run loop's statistics (RLRunLoop.statistics)
// exported through swift-metrics: an optional product, so that SwiftThreads
// itself depends on no package.
//
// Every update reads the loop's statistics and reports, labelled
// ("loop", NAME):
//   runloop_passes, runloop_sleeps             counters (what was added since the last update)
//   runloop_wakeups ("cause", timer|source|...)  counters
//   runloop_callouts ("kind", timer|source|...)  counters
//   runloop_time_asleep_seconds, runloop_time_busy_seconds   gauges (since the loop's last reset; timing on)
//   runloop_callout_duration_seconds, runloop_timer_lateness_seconds
//       gauges per ("quantile", 0.5|0.9|0.99|0.999|1) (timing on)
import Metrics
import SwiftThreads

public final class RLRunLoopMetrics: @unchecked Sendable {
    public let loop: RLRunLoop
    public let name: String
    private let factory: any MetricsFactory
    private let lock = RLLock()
    private var last: RLRunLoopStatistics?
    private var task: Task<Void, Never>?
    private let dims: [(String, String)]

    /// Exports `loop`'s statistics as `name` (the loop's thread name, say)
    /// through `factory` (the bootstrapped `MetricsSystem.factory` by
    /// default). Call ``update()`` when you want a report, or ``start(every:)``.
    public init(loop: RLRunLoop, name: String, factory: (any MetricsFactory)? = nil) {
        self.loop = loop
        self.name = name
        self.factory = factory ?? MetricsSystem.factory
        self.dims = [("loop", name)]
    }

    deinit { task?.cancel() }

    /// Reports the loop's statistics now: counters by what they grew since
    /// the last update (all of it the first time, or after the loop's
    /// statistics were reset), gauges as they are.
    public func update() {
        let now = loop.statistics
        lock.lock()
        let before = last.flatMap { prev in prev.passes <= now.passes ? prev : nil }
        last = now
        lock.unlock()
        count("runloop_passes", dims, now.passes, before?.passes)
        count("runloop_sleeps", dims, now.sleeps, before?.sleeps)
        for cause in RLWakeUpCause.allCases {
            count("runloop_wakeups", dims + [("cause", cause.description)], now.wakeUps[cause] ?? 0,
                  before?.wakeUps[cause])
        }
        for kind in RLCalloutKind.allCases {
            count("runloop_callouts", dims + [("kind", kind.description)], now.callouts[kind] ?? 0,
                  before?.callouts[kind])
        }
        guard now.isTimingEnabled else { return }
        gauge("runloop_time_asleep_seconds", dims, now.timeAsleep)
        gauge("runloop_time_busy_seconds", dims, now.timeBusy)
        for (label, s) in [("runloop_callout_duration_seconds", now.calloutDuration),
                           ("runloop_timer_lateness_seconds", now.timerLateness)] {
            for (q, v) in [("0.5", s.p50), ("0.9", s.p90), ("0.99", s.p99), ("0.999", s.p999), ("1", s.max)] {
                gauge(label, dims + [("quantile", q)], v)
            }
        }
    }

    /// Calls ``update()`` every `interval` until ``stop()`` (or the exporter
    /// goes).
    public func start(every interval: Duration) {
        lock.lock()
        defer { lock.unlock() }
        task?.cancel()
        task = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let self, !Task.isCancelled else { return }
                self.update()
            }
        }
    }

    public func stop() {
        lock.lock()
        task?.cancel()
        task = nil
        lock.unlock()
    }

    private func count(_ label: String, _ dimensions: [(String, String)], _ now: UInt64, _ before: UInt64?) {
        let delta = now &- (before ?? 0)
        guard delta > 0, delta <= UInt64(Int64.max) else { return }
        Counter(label: label, dimensions: dimensions, factory: factory).increment(by: Int64(delta))
    }

    private func gauge(_ label: String, _ dimensions: [(String, String)], _ value: Duration) {
        let (s, atto) = value.components
        Gauge(label: label, dimensions: dimensions, factory: factory).record(Double(s) + Double(atto) * 1e-18)
    }
}
