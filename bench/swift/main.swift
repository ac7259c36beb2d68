// swiftthreads-bench — the Swift thread and perform rows: SwiftThreads against
// Foundation's Thread and RunLoop on Linux, in one process.
//
//   swift run -c release swiftthreads-bench     (or `make bench-thread`)
//   BSW_ONLY=ports: the socket-port rows instead (Ports.swift, `make bench-ports-swift`)
//   BTH_ROUNDS=3, BTH_QUICK=1 as for bench/bench_thread.c; BTH_ONLY_WAY=0..3 runs one
//   round-trip variant (sync, perform wait, async+semaphore, await run);
//   BENCH_CSV=file also writes the rows for the charts (scripts/bench-chart.py)
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
// Placement: on a small VM a round trip is bimodal (~5-8 us when sender
// and worker share a CPU, ~50 us when the other side is woken on an idle
// CPU) and a free-running pair lands in either mode by chance. So every
// round-trip variant, ours and Foundation's alike, runs twice: sender and
// worker pinned to the same CPU ("1 CPU"), and to two different CPUs
// ("2 CPUs", when the process may use >= 2). The sender is the main thread,
// pinned for the round trips only; each worker pins itself first thing.
// `await worker.run` is the exception: its sender is a task on the global
// executor, so the pool thread running it pins itself before each timed
// trip (outside the timing) and the reply resumes on a pool thread that has
// pinned itself to the sender's CPU once it has run a trip.
// Targets: thread creation <= 1.15x the peer; round trip
// <= 0.7x the peer, judged on each placement. Each round runs every variant, ours and the peers
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

// MARK: - CPU affinity

// sched_{get,set}affinity are not visible through Glibc's module (no
// _GNU_SOURCE), so they are looked up at run time.
typealias AffinityFn = @convention(c) (pid_t, Int, UnsafeMutableRawPointer) -> Int32
let schedSetAffinity = unsafeBitCast(dlsym(nil, "sched_setaffinity")!, to: AffinityFn.self)
let schedGetAffinity = unsafeBitCast(dlsym(nil, "sched_getaffinity")!, to: AffinityFn.self)

func affinityMask() -> cpu_set_t {
    var set = cpu_set_t()
    if schedGetAffinity(0, MemoryLayout<cpu_set_t>.size, &set) != 0 { fatalError("sched_getaffinity") }
    return set
}

/// Sets the calling thread's mask (pid 0 = this thread on Linux).
func setAffinityMask(_ mask: cpu_set_t) {
    var set = mask
    if schedSetAffinity(0, MemoryLayout<cpu_set_t>.size, &set) != 0 { fatalError("sched_setaffinity") }
}

/// Pins the calling thread to `cpu`.
func pinSelf(_ cpu: Int) {
    var set = cpu_set_t()
    withUnsafeMutableBytes(of: &set) { $0[cpu / 8] = UInt8(1) << UInt8(cpu % 8) }
    setAffinityMask(set)
}

/// The first two CPUs this process may use (the second nil if only one).
func pickCPUs() -> (Int, Int?) {
    var mask = affinityMask()
    let cpus = withUnsafeBytes(of: &mask) { bytes in
        (0..<bytes.count * 8).filter { bytes[$0 / 8] & (UInt8(1) << UInt8($0 % 8)) != 0 }
    }
    return (cpus[0], cpus.count > 1 ? cpus[1] : nil)
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

    /// Starts the thread, which pins itself to `cpu` first.
    func start(cpu: Int) {
        let thread = Thread { [self] in
            pinSelf(cpu)
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

/// n awaited round trips onto a Foundation worker from a task on the global
/// executor, the peer of `await worker.run`: the block resumes a
/// continuation, so both sides pay the hop back onto the executor. The pool
/// thread running each trip pins itself to `senderCPU` first (untimed).
nonisolated func foundationAwaitRoundTrips(_ worker: FoundationWorker, senderCPU: Int, _ n: Int,
                                           into out: inout [Double]?) async {
    nonisolated(unsafe) let loop = worker.runLoop!
    nonisolated(unsafe) let cfLoop = worker.cfRunLoop!
    for _ in 0..<n {
        pinSelf(senderCPU)
        let t0 = nowNs()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            loop.perform(inModes: [.default]) { c.resume() }
            CFRunLoopWakeUp(cfLoop)
        }
        out?.append(Double(nowNs() - t0))
    }
}

func foundationTrips(_ worker: FoundationWorker, forAwait: Bool, senderCPU: Int, _ n: Int,
                     into out: inout [Double]?) async {
    if forAwait {
        await foundationAwaitRoundTrips(worker, senderCPU: senderCPU, n, into: &out)
    } else {
        foundationRoundTrips(worker, .performWakeUp, n, into: &out)
    }
}

// MARK: - Our worker

enum OurWay { case sync, threadPerformWait, asyncSemaphore, awaitRun }

func startWorker(cpu: Int) -> RLWorkerThread {
    let worker = RLWorkerThread(name: "bench-worker")
    do {
        try worker.start()
        try worker.sync { pinSelf(cpu) }
    } catch { fail("RLWorkerThread.start", error) }
    return worker
}

func stopWorker(_ worker: RLWorkerThread) {
    do { try worker.stop() } catch { fail("RLWorkerThread.stop", error) }
}

/// n round trips onto our worker from the calling (pinned) thread, appended
/// to `out` (nil: warm-up); not for `.awaitRun`.
func ourRoundTrips(_ worker: RLWorkerThread, _ way: OurWay, _ n: Int, into out: inout [Double]?) {
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
            case .awaitRun: preconditionFailure("awaitRun goes through ourAwaitRoundTrips")
            }
            out?.append(Double(nowNs() - t0))
        }
    } catch {
        fail("perform", error)
    }
}

/// n `await worker.run` round trips from a task on the global executor; the
/// pool thread running each trip pins itself to `senderCPU` first (untimed).
nonisolated func ourAwaitRoundTrips(_ worker: RLWorkerThread, senderCPU: Int, _ n: Int,
                                    into out: inout [Double]?) async {
    do {
        for _ in 0..<n {
            pinSelf(senderCPU)
            let t0 = nowNs()
            try await worker.run {}
            out?.append(Double(nowNs() - t0))
        }
    } catch {
        fail("perform", error)
    }
}

func ourTrips(_ worker: RLWorkerThread, _ way: OurWay, senderCPU: Int, _ n: Int, into out: inout [Double]?) async {
    if way == .awaitRun {
        await ourAwaitRoundTrips(worker, senderCPU: senderCPU, n, into: &out)
    } else {
        ourRoundTrips(worker, way, n, into: &out)
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
// The socket-port rows (bench/swift/Ports.swift) are their own run.
if env["BSW_ONLY"] == "ports" {
    runPortBench(env)
    exit(0)
}
let rounds = max(1, min(15, Int(env["BTH_ROUNDS"] ?? "") ?? 5))
let quick = env["BTH_QUICK"] != nil
let nThreads = quick ? 100 : 1000
let nTrips = quick ? 100 : 1000
let warm = nTrips / 10

let (cpuA, cpuB) = pickCPUs()
let mainMask = affinityMask()
let placements: [(name: String, workerCPU: Int?)] = [("1 CPU", cpuA), ("2 CPUs", cpuB)]

// Round-trip rows: per way, per placement, p50 then p99.
var rows = [
    Row("Thread create->entry p50: RLThread(block:)", target: 1.15),
    Row("Thread create->entry p99", target: 0),
]
for name in ["RLWorkerThread.sync", "RLThread.perform(wait)", "worker.async + semaphore", "await worker.run"] {
    for pl in placements {
        rows.append(Row("round trip p50, \(pl.name): \(name)", target: 0.7))
        rows.append(Row("round trip p99, \(pl.name)", target: 0))
    }
}

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

    // The sender (this, the main thread) is pinned for the round trips only.
    pinSelf(cpuA)
    let allWays: [OurWay] = [.sync, .threadPerformWait, .asyncSemaphore, .awaitRun]
    // BTH_ONLY_WAY=0..3 runs one variant (for profiling).
    let ways = Int(env["BTH_ONLY_WAY"] ?? "").map { [allWays[max(0, min(3, $0))]] } ?? allWays
    for way in ways {
        let w = allWays.firstIndex(of: way)!
        for (pl, placement) in placements.enumerated() {
            guard let wcpu = placement.workerCPU else { continue }
            let r = 2 + (w * placements.count + pl) * 2
            let ours = startWorker(cpu: wcpu)
            let viaPerform = FoundationWorker(), viaTimer = FoundationWorker()
            viaPerform.start(cpu: wcpu)
            viaTimer.start(cpu: wcpu)
            let forAwait = way == .awaitRun
            await ourTrips(ours, way, senderCPU: cpuA, warm, into: &none)
            await foundationTrips(viaPerform, forAwait: forAwait, senderCPU: cpuA, warm, into: &none)
            foundationRoundTrips(viaTimer, .timer, warm, into: &none)
            var o: [Double]? = [], p: [Double]? = [], t: [Double]? = []
            for c in 0..<chunks {
                let oursFirst = (c + round) % 2 == 0
                if oursFirst { await ourTrips(ours, way, senderCPU: cpuA, nTrips / chunks, into: &o) }
                await foundationTrips(viaPerform, forAwait: forAwait, senderCPU: cpuA, nTrips / chunks, into: &p)
                foundationRoundTrips(viaTimer, .timer, nTrips / chunks, into: &t)
                if !oursFirst { await ourTrips(ours, way, senderCPU: cpuA, nTrips / chunks, into: &o) }
            }
            viaTimer.stop()
            viaPerform.stop()
            stopWorker(ours)
            rows[r].record(ours: quantile(o!, 0.5), perform: quantile(p!, 0.5), timer: quantile(t!, 0.5))
            rows[r + 1].record(ours: quantile(o!, 0.99), perform: quantile(p!, 0.99), timer: quantile(t!, 0.99))
        }
    }
    setAffinityMask(mainMask)
}

var load = [Double](repeating: .nan, count: 3)
_ = getloadavg(&load, 3)
print("""

SwiftThreads vs Foundation (Thread, RunLoop) on Linux, Swift release build — one process, \
\(rounds) round\(rounds == 1 ? "" : "s"), median of the per-round values; \
\(ProcessInfo.processInfo.activeProcessorCount) CPUs, load average \(String(format: "%.1f", load[0]))

""")
print("\(pad("ours", 50)) | \(pad("ours us", 9)) | \(pad("Foundation peer", 26)) | \(pad("peer us", 9)) | "
    + "\(pad("Timer us", 9)) | \(pad("ratio", 7)) | \(pad("target", 7)) | met?")
print(String(repeating: "-", count: 50) + "-+-" + String(repeating: "-", count: 9) + "-+-"
    + String(repeating: "-", count: 26) + "-+-" + String(repeating: "-", count: 9) + "-+-"
    + String(repeating: "-", count: 9) + "-+-" + String(repeating: "-", count: 7) + "-+-"
    + String(repeating: "-", count: 7) + "-+-----")
var misses = 0
var rtMet = [0, 0], rtRows = [0, 0]
for (i, row) in rows.enumerated() where !row.oursV.isEmpty {
    let awaitRows = 2 + 3 * placements.count * 2  // the `await worker.run` rows come last
    let peer = i < 2 ? (i == 0 ? "Thread(block:)+start" : "")
        : (i % 2 == 1 ? "" : i >= awaitRows ? "await perform+WakeUp" : "RunLoop.perform+WakeUp")
    let ratio = median(row.ratioV)
    var target = "", met = ""
    if row.target > 0 {
        target = String(format: "<=%.2fx", row.target)
        met = ratio <= row.target ? "yes" : "NO"
        if ratio > row.target { misses += 1 }
        if i >= 2 {
            let pl = (i - 2) / 2 % placements.count
            rtRows[pl] += 1
            if ratio <= row.target { rtMet[pl] += 1 }
        }
    }
    print("\(pad(row.ours, 50)) | \(cell(median(row.oursV), width: 9)) | \(pad(peer, 26)) | "
        + "\(cell(median(row.perfV), width: 9)) | \(cell(median(row.timerV), width: 9)) | "
        + "\(String(format: "%6.2fx", ratio)) | \(pad(target, 7)) | \(met)")
}
print("""

us = microseconds; ratio = median over rounds of ours / peer (the "peer us" column). Thread rows: \(nThreads) \
threads per side per round. Round trips: \(nTrips) timed (+\(warm) warm-up) per variant per round onto a \
worker asleep in its run loop. "Timer us": the Foundation-only route, RunLoop.add(Timer(timeInterval: 0)) \
from the sender (shown, not the ratio's peer). Foundation's perform(inModes:block:) does not wake the loop \
on Linux: the peer adds CFRunLoopWakeUp (import CoreFoundation) after it. Placements: "1 CPU" = sender and \
worker pinned to CPU \(cpuA); "2 CPUs" = sender on CPU \(cpuA), worker on CPU \(cpuB.map(String.init) ?? "-"). \
Unpinned, a round trip lands by chance in one of two modes (a hand-off on one CPU, ~5-8 us here; a wake-up \
on an idle CPU, ~50 us), so the peers are compared per placement. `await worker.run`: the sender is a pool \
thread that pins itself to CPU \(cpuA) before each trip (untimed); its peer awaits a continuation that the \
RunLoop.perform block resumes (both sides pay the hop back onto the global executor). The thread rows are \
not pinned.
\(placements.indices.map { pl in
    rtRows[pl] == 0 ? "Round-trip target (<=0.70x Foundation), \(placements[pl].name): not measured (one CPU only)."
        : "Round-trip target (<=0.70x Foundation), \(placements[pl].name): \(rtMet[pl]) of \(rtRows[pl]) variants met."
}.joined(separator: "\n"))
Targets: \(misses == 0 ? "all met" : "some MISSED (see met?)").
(whole run: \(String(format: "%.0f", Double(nowNs() - started) / 1e9)) s)
""")

// The rows for the charts: group,row,peer,ratio,ratio_min,ratio_max,ours,peer_value,unit
// (the per-round ratios ours/peer).
if let path = env["BENCH_CSV"], !path.isEmpty {
    func quoted(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
    var lines = ["group,row,peer,ratio,ratio_min,ratio_max,ours,peer_value,unit"]
    var what = ""  // a p99 row measures what the p50 row above it names
    for (i, row) in rows.enumerated() where !row.oursV.isEmpty {
        if let colon = row.ours.firstIndex(of: ":") { what = String(row.ours[colon...]) }
        let label = row.ours.contains(":") ? row.ours : row.ours + what
        let ratios = row.ratioV.filter { $0.isFinite && $0 > 0 }
        let spread = ratios.isEmpty ? ",," : String(format: "%g,%g,%g", median(ratios), ratios.min()!, ratios.max()!)
        let peer = i < 2 ? "Foundation Thread" : "Foundation RunLoop"
        lines.append("\(quoted("threads and perform (Swift)")),\(quoted(label)),\(quoted(peer)),\(spread),"
            + String(format: "%g,%g,", median(row.oursV) / 1e3, median(row.perfV) / 1e3) + quoted("us"))
    }
    if !FileManager.default.createFile(atPath: path, contents: (lines.joined(separator: "\n") + "\n").data(using: .utf8)) {
        print("swiftthreads-bench: could not write \(path)")
    }
}
