// RLRunLoopHealth.swift — which callout held a run loop and for how long,
// and what a loop spends its time on (the C side: RLRunLoopHealth.h;
// docs/runloop.md, "Loop health").
internal import CRunLoop

/// The kind of callout a slow-callout report is about.
public enum RLCalloutKind: Int, Sendable, CaseIterable, CustomStringConvertible {
    case timer = 0, source, observer, perform, fileDescriptor, socket, port, signal, mainQueue, stream

    /// "timer", "source", ... (the C library's names).
    public var description: String { String(cString: RLCalloutKindGetName(CRunLoop.RLCalloutKind(UInt32(rawValue)))) }
}

/// What woke a sleeping loop: the kind of the first callout after it;
/// `.explicit` when none followed (a wake-up, a stop, the run's time limit).
public enum RLWakeUpCause: Int, Sendable, CaseIterable, CustomStringConvertible {
    case timer = 0, source, fileDescriptor, perform, explicit, mainQueue

    public var description: String { String(cString: RLWakeUpCauseGetName(CRunLoop.RLWakeUpCause(UInt32(rawValue)))) }
}

/// One callout that held its loop longer than the threshold.
public struct RLSlowCalloutReport: Sendable, CustomStringConvertible {
    public let kind: RLCalloutKind
    /// The callout function's symbol, or its address as "0x..." (a Swift
    /// closure's callout is the library's trampoline that calls it).
    public let functionName: String
    /// The description of the timer, source, socket... that made the callout.
    public let objectDescription: String
    public let mode: RLRunLoop.Mode
    public let duration: Duration
    public let threshold: Duration
    /// The loop that made the callout (the report comes on its thread).
    public let runLoop: RLRunLoop

    public var description: String {
        "slow callout: \(kind) \(functionName) held the run loop \(duration) in mode \(mode.rawValue) "
            + "(threshold \(threshold)): \(objectDescription)"
    }
}

/// A histogram's percentiles.
public struct RLLatencySummary: Sendable, Equatable {
    public let count: UInt64
    public let p50: Duration, p90: Duration, p99: Duration, p999: Duration, max: Duration
}

/// A snapshot of a loop's statistics (``RLRunLoop/statistics``).
public struct RLRunLoopStatistics: Sendable, Equatable {
    /// Passes of the loop (CF's iterations).
    public let passes: UInt64
    /// Passes that waited for something to happen.
    public let sleeps: UInt64
    /// Those sleeps, by what ended them.
    public let wakeUps: [RLWakeUpCause: UInt64]
    /// Callouts made, by kind.
    public let callouts: [RLCalloutKind: UInt64]
    /// Time asleep and busy (kept while ``RLRunLoop/isTimingEnabled``).
    public let timeAsleep: Duration, timeBusy: Duration
    public let isTimingEnabled: Bool
    /// Callout durations and timer lateness (kept while timing is on).
    public let calloutDuration: RLLatencySummary
    public let timerLateness: RLLatencySummary
}

extension RLRunLoop {
    /// The slow-callout threshold of this loop (`nil`: the process's is
    /// used). A negative duration is refused (nothing changes).
    public var slowCalloutThreshold: Duration? {
        get {
            let s = RLRunLoopGetSlowCalloutThreshold(ref)
            return s > 0 ? .seconds(s) : nil
        }
        set { _ = RLRunLoopSetSlowCalloutThreshold(ref, Self.thresholdSeconds(newValue)) }
    }

    /// The process's slow-callout threshold (`RL_SLOW_CALLOUT_MS` sets it at
    /// start), `nil` when none.
    public static var processSlowCalloutThreshold: Duration? {
        get {
            let s = RLRunLoopGetSlowCalloutThreshold(nil)
            return s > 0 ? .seconds(s) : nil
        }
        set { _ = RLRunLoopSetSlowCalloutThreshold(nil, thresholdSeconds(newValue)) }
    }

    private static func thresholdSeconds(_ d: Duration?) -> Double {
        guard let d else { return 0 }
        let s = d.rlSeconds
        return s >= 0 ? s : -1 // -1: refused by the library, nothing changes
    }

    /// Sends every slow-callout report of the process to `handler`, called
    /// on the loop's thread right after the callout; `nil` restores the
    /// library's stderr line.
    public static func setSlowCalloutHandler(_ handler: (@Sendable (RLSlowCalloutReport) -> Void)?) {
        slowCalloutHandler.withLock { $0 = handler }
        if handler != nil {
            RLSetSlowCalloutHandler(slowCalloutTrampoline, nil)
        } else {
            RLSetSlowCalloutHandler(nil, nil)
        }
    }

    /// Turns this loop's timing (times asleep and busy, the callout and
    /// timer-lateness histograms) on or off.
    public var isTimingEnabled: Bool {
        get { RLRunLoopIsTimingEnabled(ref) }
        set { _ = RLRunLoopSetTimingEnabled(ref, newValue) }
    }

    /// A snapshot of the loop's statistics since it was made or last reset;
    /// any thread may read it.
    public var statistics: RLRunLoopStatistics {
        var s = CRunLoop.RLRunLoopStatistics()
        guard RLRunLoopCopyStatistics(ref, &s) else { fatalError("RLRunLoop.statistics: \(RLError.last())") }
        return RLRunLoopStatistics(s)
    }

    /// Starts the loop's statistics again from zero.
    public func resetStatistics() { _ = RLRunLoopResetStatistics(ref) }

    /// Snapshots of the loop's statistics every `interval`, until the
    /// consumer stops iterating.
    public func statisticsUpdates(every interval: Duration) -> AsyncStream<RLRunLoopStatistics> {
        AsyncStream { continuation in
            let task = Task { [self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    if Task.isCancelled { break }
                    continuation.yield(statistics)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

private let slowCalloutHandler = ThreadsMutexProtected<(@Sendable (RLSlowCalloutReport) -> Void)?>(nil)

private let slowCalloutTrampoline: CRunLoop.RLSlowCalloutHandler = { report, _ in
    guard let report, let handler = slowCalloutHandler.withLock({ $0 }) else { return }
    let r = report.pointee
    guard let loop = r.runLoop else { return }
    handler(RLSlowCalloutReport(
        kind: RLCalloutKind(rawValue: Int(r.kind.rawValue)) ?? .timer,
        functionName: r.functionName.map { String(cString: $0) } ?? "?",
        objectDescription: r.objectDescription.map { String(cString: $0) } ?? "",
        mode: RLRunLoop.Mode(rawValue: r.mode.map { String(cString: $0) } ?? ""),
        duration: .seconds(r.duration),
        threshold: .seconds(r.threshold),
        runLoop: RLRunLoop.wrapper(for: loop)))
}

extension RLLatencySummary {
    init(_ s: CRunLoop.RLLatencySummary) {
        count = s.count
        p50 = .seconds(s.p50)
        p90 = .seconds(s.p90)
        p99 = .seconds(s.p99)
        p999 = .seconds(s.p999)
        max = .seconds(s.max)
    }
}

extension RLRunLoopStatistics {
    init(_ s: CRunLoop.RLRunLoopStatistics) {
        passes = s.passes
        sleeps = s.sleeps
        var wakes: [RLWakeUpCause: UInt64] = [:]
        withUnsafeBytes(of: s.wakeUps) { raw in
            let counts = raw.bindMemory(to: UInt64.self)
            for cause in RLWakeUpCause.allCases { wakes[cause] = counts[cause.rawValue] }
        }
        wakeUps = wakes
        var kinds: [RLCalloutKind: UInt64] = [:]
        withUnsafeBytes(of: s.callouts) { raw in
            let counts = raw.bindMemory(to: UInt64.self)
            for kind in RLCalloutKind.allCases { kinds[kind] = counts[kind.rawValue] }
        }
        callouts = kinds
        timeAsleep = .seconds(s.timeAsleep)
        timeBusy = .seconds(s.timeBusy)
        isTimingEnabled = s.timing
        calloutDuration = RLLatencySummary(s.calloutDuration)
        timerLateness = RLLatencySummary(s.timerLateness)
    }
}
