// swiftthreads-bench — issue 4's Swift rows: SwiftThreads against
// Foundation's Thread and RunLoop on Linux, in one process.
//
//   swift run -c release swiftthreads-bench     (or `make bench-thread`)
//   BTH_ROUNDS=3, BTH_QUICK=1 as for bench/bench_thread.c
//
// Rows:
//   - Thread create+start -> entry: from the initializer call to the first
//     statement of the body; RLThread(block:) vs Foundation's Thread(block:).
//     Both bodies stamp the clock and signal a semaphore; the creator then
//     waits until the thread reports finished before making the next one.
//   - Perform round trip onto a worker thread that sleeps in its run loop:
//     a closure sent from this thread, run there, and the reply back.
//     Ours: RLWorkerThread.sync, RLThread.perform(waitUntilDone: true),
//     RLWorkerThread.async + semaphore, and `await worker.run` (from a
//     nonisolated async function: the reply resumes a task on the global
//     executor).
//     Foundation (a Thread in RunLoop.current.run(mode:before:), kept alive
//     by a far-future repeating Timer), two ways, both replying through the
//     same DispatchSemaphore:
//       "perform+WakeUp": RunLoop.perform(inModes:block:) followed by
//         CFRunLoopWakeUp. On Linux, perform(inModes:) only queues the
//         block (CFRunLoopPerformBlock) and does not wake the loop, and
//         RunLoop.getCFRunLoop() is not public; the worker captures
//         CFRunLoopGetCurrent() itself (`import CoreFoundation` works with
//         the Linux toolchain). This is the direct way and the row's peer.
//       "Timer": RunLoop.add(Timer(timeInterval: 0, repeats: false) {...},
//         forMode:) from the sender — the only Foundation-only way to hand a
//         closure to a thread's run loop and wake it on Linux
//         (perform(_:on:with:waitUntilDone:) needs the ObjC runtime).
// Targets (issue 4): thread creation <= 1.15x the peer; round trip
// <= 0.7x the peer. Each round runs every variant, ours and the peers
// alternating in short chunks; cells are medians over rounds of each
// round's p50 / p99, the ratio the median of the per-round ratios.
import CoreFoundation
import Dispatch
import Foundation
import SwiftThreads

#if canImport(Glibc)
import Glibc
#endif

@inline(__always) func nowNs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

func quantile(_ v: [Double], _ q: Double) -> Double {
    let s = v.sorted()
    return s[Int(q * Double(s.count - 1) + 0.5)]
}

func median(_ v: [Double]) -> Double {
    guard !v.isEmpty else { return .nan }
    let s = v.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func fail(_ what: String, _ error: any Error) -> Never {
    fatalError("swiftthreads-bench: \(what): \(error)")
}

/// A slot written by one thread before a semaphore signal and read by
/// another after the matching wait (the semaphore orders the two).
final class Slot: @unchecked Sendable {
    var ns: Int64 = 0
}

// MARK: - Thread create+start -> entry

/// Waits (bounded) until `isFinished` holds, so that the next thread is not
/// created while this one is still exiting.
func waitFinished(_ isFinished: () -> Bool) {
    let deadline = nowNs() + 100_000_000
    while !isFinished() && nowNs() < deadline { sched_yield() }
}

func foundationThreadLatency(_ n: Int) -> [Double] {
    var out: [Double] = []
    out.reserveCapacity(n)
    let sem = DispatchSemaphore(value: 0)
    for _ in 0..<n {
        let slot = Slot()
        let t0 = nowNs()
        let thread = Thread {
            slot.ns = nowNs()
            sem.signal()
        }
        thread.start()
        sem.wait()
        waitFinished { thread.isFinished }
        out.append(Double(slot.ns - t0))
    }
    return out
}

func ourThreadLatency(_ n: Int) -> [Double] {
    var out: [Double] = []
    out.reserveCapacity(n)
    let sem = DispatchSemaphore(value: 0)
    for _ in 0..<n {
        let slot = Slot()
        let t0 = nowNs()
        let thread = RLThread {
            slot.ns = nowNs()
            sem.signal()
        }
        do { try thread.start() } catch { fail("RLThread.start", error) }
        sem.wait()
        waitFinished { thread.isFinished }
        out.append(Double(slot.ns - t0))
    }
    return out
}

// MARK: - Foundation worker

/// A Foundation Thread sleeping in its RunLoop. Its fields are written on
/// the worker before `ready` is signalled and read by the sender after.
final class FoundationWorker: @unchecked Sendable {
    private(set) var runLoop: RunLoop!
    private(set) var cfRunLoop: CFRunLoop!
    private var done = false
    private let ready = DispatchSemaphore(value: 0)
    private let exited = DispatchSemaphore(value: 0)

    func start() {
        let thread = Thread { [self] in
            let loop = RunLoop.current
            runLoop = loop
            cfRunLoop = CFRunLoopGetCurrent()
            let keepAlive = Timer(timeInterval: 1e9, repeats: true) { _ in }
            loop.add(keepAlive, forMode: .default)
            ready.signal()
            while !done { _ = loop.run(mode: .default, before: .distantFuture) }
            keepAlive.invalidate()
            exited.signal()
        }
        thread.start()
        ready.wait()
    }

    func stop() {
        runLoop.perform(inModes: [.default]) { [self] in
            done = true
            CFRunLoopStop(CFRunLoopGetCurrent())
        }
        CFRunLoopWakeUp(cfRunLoop)
        exited.wait()
    }
}

enum FoundationWay { case performWakeUp, timer }

/// n round trips onto a Foundation worker, appended to `out` (nil: warm-up).
func foundationRoundTrips(_ worker: FoundationWorker, _ way: FoundationWay, _ n: Int, into out: inout [Double]?) {
    let loop = worker.runLoop!, cfLoop = worker.cfRunLoop!
    let sem = DispatchSemaphore(value: 0)
    for _ in 0..<n {
        let t0 = nowNs()
        switch way {
        case .performWakeUp:
            loop.perform(inModes: [.default]) { sem.signal() }
            CFRunLoopWakeUp(cfLoop)
        case .timer:
            loop.add(Timer(timeInterval: 0, repeats: false) { _ in sem.signal() }, forMode: .default)
        }
        sem.wait()
        out?.append(Double(nowNs() - t0))
    }
}

// MARK: - Our worker

enum OurWay { case sync, threadPerformWait, asyncSemaphore, awaitRun }

func startWorker() -> RLWorkerThread {
    let worker = RLWorkerThread(name: "bench-worker")
    do { try worker.start() } catch { fail("RLWorkerThread.start", error) }
    return worker
}

func stopWorker(_ worker: RLWorkerThread) {
    do { try worker.stop() } catch { fail("RLWorkerThread.stop", error) }
}

/// n round trips onto our worker, appended to `out` (nil: warm-up).
nonisolated func ourRoundTrips(_ worker: RLWorkerThread, _ way: OurWay, _ n: Int,
                               into out: inout [Double]?) async {
    let thread = worker.thread!
    let sem = DispatchSemaphore(value: 0)
    do {
        for _ in 0..<n {
            let t0 = nowNs()
            switch way {
            case .sync: try worker.sync {}
            case .threadPerformWait: try thread.perform(waitUntilDone: true) {}
            case .asyncSemaphore:
                try worker.async { sem.signal() }
                sem.wait()
            case .awaitRun: try await worker.run {}
            }
            out?.append(Double(nowNs() - t0))
        }
    } catch {
        fail("perform", error)
    }
}

// MARK: - Table

struct Row {
    let ours: String
    let target: Double  // ours / peer must be <= target; 0 = none
    var oursV: [Double] = [], perfV: [Double] = [], timerV: [Double] = [], ratioV: [Double] = []
    init(_ ours: String, target: Double) {
        self.ours = ours
        self.target = target
    }
    /// `perform` is the row's peer (the ratio); `timer` is shown beside it.
    mutating func record(ours: Double, perform: Double, timer: Double = .nan) {
        oursV.append(ours)
        perfV.append(perform)
        if !timer.isNaN { timerV.append(timer) }
        ratioV.append(ours / perform)
    }
}

func cell(_ v: Double, width: Int) -> String {
    let s = v.isNaN ? "-" : String(format: "%.2f", v / 1e3)
    return String(repeating: " ", count: max(0, width - s.count)) + s
}

func pad(_ s: String, _ width: Int) -> String {
    s.count >= width ? s : s + String(repeating: " ", count: width - s.count)
}

let env = ProcessInfo.processInfo.environment
let rounds = max(1, min(15, Int(env["BTH_ROUNDS"] ?? "") ?? 7))
let quick = env["BTH_QUICK"] != nil
let nThreads = quick ? 100 : 1000
let nTrips = quick ? 300 : 3000
let warm = nTrips / 10

var rows = [
    Row("Thread create->entry p50: RLThread(block:)", target: 1.15),
    Row("Thread create->entry p99", target: 0),
    Row("round trip p50: RLWorkerThread.sync", target: 0.7),
    Row("round trip p99", target: 0),
    Row("round trip p50: RLThread.perform(wait)", target: 0.7),
    Row("round trip p99", target: 0),
    Row("round trip p50: worker.async + semaphore", target: 0.7),
    Row("round trip p99", target: 0),
    Row("round trip p50: await worker.run", target: 0.7),
    Row("round trip p99", target: 0),
]

let started = nowNs()
// One-time costs (Foundation's and our thread registries, the runtime) out
// of the first round.
_ = foundationThreadLatency(8)
_ = ourThreadLatency(8)

// Inside a round ours and the peers alternate in `chunks` short chunks
// (order flipped each chunk), so that a neighbour stealing the CPU for a
// while hurts every side alike.
let chunks = 10
for round in 0..<rounds {
    var none: [Double]? = nil  // warm-up: nothing kept
    var mine: [Double] = [], theirs: [Double] = []
    for c in 0..<chunks {
        let oursFirst = (c + round) % 2 == 0
        if oursFirst { mine += ourThreadLatency(nThreads / chunks) }
        theirs += foundationThreadLatency(nThreads / chunks)
        if !oursFirst { mine += ourThreadLatency(nThreads / chunks) }
    }
    rows[0].record(ours: quantile(mine, 0.5), perform: quantile(theirs, 0.5))
    rows[1].record(ours: quantile(mine, 0.99), perform: quantile(theirs, 0.99))

    let ways: [(OurWay, Int)] = [(.sync, 2), (.threadPerformWait, 4), (.asyncSemaphore, 6), (.awaitRun, 8)]
    for (way, r) in ways {
        let ours = startWorker()
        let viaPerform = FoundationWorker(), viaTimer = FoundationWorker()
        viaPerform.start()
        viaTimer.start()
        await ourRoundTrips(ours, way, warm, into: &none)
        foundationRoundTrips(viaPerform, .performWakeUp, warm, into: &none)
        foundationRoundTrips(viaTimer, .timer, warm, into: &none)
        var o: [Double]? = [], p: [Double]? = [], t: [Double]? = []
        for c in 0..<chunks {
            let oursFirst = (c + round) % 2 == 0
            if oursFirst { await ourRoundTrips(ours, way, nTrips / chunks, into: &o) }
            foundationRoundTrips(viaPerform, .performWakeUp, nTrips / chunks, into: &p)
            foundationRoundTrips(viaTimer, .timer, nTrips / chunks, into: &t)
            if !oursFirst { await ourRoundTrips(ours, way, nTrips / chunks, into: &o) }
        }
        viaTimer.stop()
        viaPerform.stop()
        stopWorker(ours)
        rows[r].record(ours: quantile(o!, 0.5), perform: quantile(p!, 0.5), timer: quantile(t!, 0.5))
        rows[r + 1].record(ours: quantile(o!, 0.99), perform: quantile(p!, 0.99), timer: quantile(t!, 0.99))
    }
}

var load = [Double](repeating: .nan, count: 3)
_ = getloadavg(&load, 3)
print("""

SwiftThreads vs Foundation (Thread, RunLoop) on Linux, Swift release build — one process, \
\(rounds) round\(rounds == 1 ? "" : "s"), median of the per-round values; \
\(ProcessInfo.processInfo.activeProcessorCount) CPUs, load average \(String(format: "%.1f", load[0]))

""")
print("\(pad("ours", 42)) | \(pad("ours us", 9)) | \(pad("Foundation peer", 26)) | \(pad("peer us", 9)) | "
    + "\(pad("Timer us", 9)) | \(pad("ratio", 7)) | \(pad("target", 7)) | met?")
print(String(repeating: "-", count: 42) + "-+-" + String(repeating: "-", count: 9) + "-+-"
    + String(repeating: "-", count: 26) + "-+-" + String(repeating: "-", count: 9) + "-+-"
    + String(repeating: "-", count: 9) + "-+-" + String(repeating: "-", count: 7) + "-+-"
    + String(repeating: "-", count: 7) + "-+-----")
var misses = 0
for (i, row) in rows.enumerated() {
    let peer = i < 2 ? (i == 0 ? "Thread(block:)+start" : "") : (i % 2 == 0 ? "RunLoop.perform+WakeUp" : "")
    let ratio = median(row.ratioV)
    var target = "", met = ""
    if row.target > 0 {
        target = String(format: "<=%.2fx", row.target)
        met = ratio <= row.target ? "yes" : "NO"
        if ratio > row.target { misses += 1 }
    }
    print("\(pad(row.ours, 42)) | \(cell(median(row.oursV), width: 9)) | \(pad(peer, 26)) | "
        + "\(cell(median(row.perfV), width: 9)) | \(cell(median(row.timerV), width: 9)) | "
        + "\(String(format: "%6.2fx", ratio)) | \(pad(target, 7)) | \(met)")
}
print("""

us = microseconds; ratio = median over rounds of ours / peer (the "peer us" column). Thread rows: \(nThreads) \
threads per side per round. Round trips: \(nTrips) timed (+\(warm) warm-up) per variant per round onto a \
worker asleep in its run loop. "Timer us": the Foundation-only route, RunLoop.add(Timer(timeInterval: 0)) \
from the sender (shown, not the ratio's peer). Foundation's perform(inModes:block:) does not wake the loop \
on Linux: the peer adds CFRunLoopWakeUp (import CoreFoundation) after it.
Targets: \(misses == 0 ? "all met" : "some MISSED (see met?)").
(whole run: \(String(format: "%.0f", Double(nowNs() - started) / 1e9)) s)
""")
