// swiftthreads-nio-bench — our run loop (RLWorkerThread) against swift-nio's
// EventLoop (a MultiThreadedEventLoopGroup of one thread) and Foundation's
// RunLoop (a Thread running it), all three in this one process run.
//
// Rows (each peer is one thread with a loop; the sender is the main thread):
//   execute       N closures sent from the main thread, each run on the
//                 loop; ns per closure, first send to last run.
//                 ours: worker.async { }; NIO: loop.execute { };
//                 Foundation: RunLoop.perform(inModes:) + CFRunLoopWakeUp
//                 (perform alone does not wake the loop on Linux).
//   schedule+cancel N  on the loop's own thread, N timers/tasks due in a
//                 minute made and scheduled, then all cancelled; ns per timer.
//                 ours: RLTimer + add + invalidate; NIO: scheduleTask(in:) +
//                 cancel(); Foundation: Timer + RunLoop.add + invalidate.
//   round trip    a closure sent to the loop, run there, its value back to
//                 the waiting sender; ns per trip. ours: worker.sync { };
//                 NIO: loop.submit { }.wait(); Foundation: perform + wake-up
//                 + a semaphore.
//   execute, CPU  the execute row again, as CPU time of the whole process
//                 (sender and loop thread) per closure.
//   idle CPU      CPU time the loop's thread uses while it has nothing to do,
//                 in µs of CPU per second idle (its own thread CPU clock, read
//                 from outside through pthread_getcpuclockid: no wake-up).
//
// Each round runs every row for every peer, peers alternating; a cell is the
// median over rounds, and ours/peer is the median of the per-round ratios
// with their min–max (below 1.00: ours is faster or lighter).
//   NIOB_ROUNDS=N (default 7), NIOB_QUICK=1 (smaller N, 3 rounds)
//   NIOB_CSV=file  also writes one line per cell for scripts/bench-chart.py
//   NIOB_ONLY=execute,schedule,round,idle  runs the rows whose names start
//                 with one of these words (default: every row)
//   NIOB_PEERS=ours,NIO  runs only these peers (ours always runs: it is
//                 what every ratio divides)
import CoreFoundation
import Dispatch
import Foundation
import NIOCore
import NIOPosix
import SwiftThreads

#if canImport(Glibc)
import Glibc
#endif

@inline(__always) func nowNs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// The calling thread's CPU time, ns.
func threadCPUNs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// The calling thread's CPU clock, to be read from another thread.
func threadCPUClock() -> clockid_t {
    var cid = clockid_t()
    precondition(pthread_getcpuclockid(pthread_self(), &cid) == 0)
    return cid
}

/// A thread's CPU time through its clock (see threadCPUClock), ns: read
/// from outside, so the thread is not woken to measure it.
func cpuNs(_ cid: clockid_t) -> Int64 {
    var ts = timespec()
    clock_gettime(cid, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

/// The CPU time of the whole process (every thread), ns.
func processCPUNs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
}

func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
let quick = env("NIOB_QUICK").map { $0 != "" && $0 != "0" } ?? false
let rounds = Int(env("NIOB_ROUNDS") ?? "") ?? (quick ? 3 : 7)
let executeN = quick ? 20_000 : 200_000
let tripN = quick ? 2_000 : 20_000
let scheduleNs = quick ? [10_000] : [10_000, 100_000]
let idleSeconds = quick ? 0.2 : 1.0

func median(_ v: [Double]) -> Double {
    let s = v.sorted()
    return s.isEmpty ? .nan : (s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2)
}

/// A counter touched only on the loop's thread; the last increment signals.
final class Countdown {
    var left: Int
    let done = DispatchSemaphore(value: 0)
    init(_ n: Int) { left = n }
    @inline(__always) func tick() {
        left -= 1
        if left == 0 { done.signal() }
    }
}

/// A result written on the loop's thread before a semaphore signal and read
/// after the matching wait.
final class Slot<T>: @unchecked Sendable { var value: T? }

/// What every peer does: one loop on its own thread.
protocol Peer: AnyObject {
    var name: String { get }
    func execute(_ n: Int) -> Double            // ns per closure
    func scheduleCancel(_ n: Int) -> Double     // ns per timer
    func roundTrip(_ n: Int) -> Double          // ns per trip
    // The loop thread's CPU time, read without waking it: its clock id is
    // taken once, on that thread (the first call wakes it; later ones do not).
    func loopThreadCPU() -> Int64
    func shutdown()
}

// MARK: ours

final class Ours: Peer {
    let name = "ours"
    let worker = RLWorkerThread(name: "ours")
    init() { try! worker.start() }

    func execute(_ n: Int) -> Double {
        let c = Countdown(n)
        let t0 = nowNs()
        for _ in 0..<n { try! worker.async { c.tick() } }
        c.done.wait()
        return Double(nowNs() - t0) / Double(n)
    }

    func scheduleCancel(_ n: Int) -> Double {
        try! worker.sync {
            let loop = RLRunLoop.current
            let t0 = nowNs()
            let due = RLTime.now + 60
            var timers: [RLTimer] = []
            timers.reserveCapacity(n)
            for i in 0..<n {
                let timer = RLTimer(fire: due + Double(i) * 1e-6, interval: 0, repeats: false) { _ in }
                loop.add(timer, forMode: .default)
                timers.append(timer)
            }
            for timer in timers { timer.invalidate() }
            return Double(nowNs() - t0) / Double(n)
        }
    }

    func roundTrip(_ n: Int) -> Double {
        var sum = 0
        let t0 = nowNs()
        for i in 0..<n { sum &+= try! worker.sync { i } }
        precondition(sum == n * (n - 1) / 2)
        return Double(nowNs() - t0) / Double(n)
    }

    private lazy var loopClock: clockid_t = try! worker.sync { threadCPUClock() }
    func loopThreadCPU() -> Int64 { cpuNs(loopClock) }
    func shutdown() { try! worker.stop() }
}

// MARK: NIO

final class NIO: Peer {
    let name = "NIO"
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop: EventLoop
    init() { loop = group.next() }

    func execute(_ n: Int) -> Double {
        let c = Countdown(n)
        let t0 = nowNs()
        for _ in 0..<n { loop.execute { c.tick() } }
        c.done.wait()
        return Double(nowNs() - t0) / Double(n)
    }

    func scheduleCancel(_ n: Int) -> Double {
        let loop = self.loop
        return try! loop.submit { () -> Double in
            let t0 = nowNs()
            var tasks: [Scheduled<Void>] = []
            tasks.reserveCapacity(n)
            for i in 0..<n {
                tasks.append(loop.scheduleTask(in: .seconds(60) + .nanoseconds(Int64(i) * 1_000)) {})
            }
            for task in tasks { task.cancel() }
            return Double(nowNs() - t0) / Double(n)
        }.wait()
    }

    func roundTrip(_ n: Int) -> Double {
        var sum = 0
        let t0 = nowNs()
        for i in 0..<n { sum &+= try! loop.submit { i }.wait() }
        precondition(sum == n * (n - 1) / 2)
        return Double(nowNs() - t0) / Double(n)
    }

    private lazy var loopClock: clockid_t = try! loop.submit { threadCPUClock() }.wait()
    func loopThreadCPU() -> Int64 { cpuNs(loopClock) }
    func shutdown() { try! group.syncShutdownGracefully() }
}

// MARK: Foundation

final class FoundationPeer: Peer {
    let name = "Foundation"
    private(set) var runLoop: RunLoop!
    private(set) var cfRunLoop: CFRunLoop!
    private var done = false
    private let ready = DispatchSemaphore(value: 0)
    private let exited = DispatchSemaphore(value: 0)

    init() {
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

    /// Runs `body` on the loop and waits for its value.
    func sync<T>(_ body: @escaping () -> T) -> T {
        let result = Slot<T>()
        let sem = DispatchSemaphore(value: 0)
        runLoop.perform(inModes: [.default]) {
            result.value = body()
            sem.signal()
        }
        CFRunLoopWakeUp(cfRunLoop)
        sem.wait()
        return result.value!
    }

    func execute(_ n: Int) -> Double {
        let c = Countdown(n)
        let t0 = nowNs()
        for _ in 0..<n {
            runLoop.perform(inModes: [.default]) { c.tick() }
            CFRunLoopWakeUp(cfRunLoop)
        }
        c.done.wait()
        return Double(nowNs() - t0) / Double(n)
    }

    func scheduleCancel(_ n: Int) -> Double {
        sync { () -> Double in
            let loop = RunLoop.current
            let t0 = nowNs()
            let due = Date(timeIntervalSinceNow: 60)
            var timers: [Timer] = []
            timers.reserveCapacity(n)
            for i in 0..<n {
                let timer = Timer(fire: due.addingTimeInterval(Double(i) * 1e-6), interval: 0, repeats: false) { _ in }
                loop.add(timer, forMode: .default)
                timers.append(timer)
            }
            for timer in timers { timer.invalidate() }
            return Double(nowNs() - t0) / Double(n)
        }
    }

    func roundTrip(_ n: Int) -> Double {
        var sum = 0
        let t0 = nowNs()
        for i in 0..<n { sum &+= sync { i } }
        precondition(sum == n * (n - 1) / 2)
        return Double(nowNs() - t0) / Double(n)
    }

    private lazy var loopClock: clockid_t = sync { threadCPUClock() }
    func loopThreadCPU() -> Int64 { cpuNs(loopClock) }

    func shutdown() {
        runLoop.perform(inModes: [.default]) { [self] in
            done = true
            CFRunLoopStop(CFRunLoopGetCurrent())
        }
        CFRunLoopWakeUp(cfRunLoop)
        exited.wait()
    }
}

// MARK: The run

let wanted = env("NIOB_PEERS").map { $0.lowercased().split(separator: ",").map(String.init) }
func wants(_ name: String) -> Bool { name == "ours" || wanted?.contains(name.lowercased()) ?? true }
let peers: [Peer] = [Ours()] + (wants("NIO") ? [NIO()] : []) + (wants("Foundation") ? [FoundationPeer()] : [])
var rows: [(name: String, unit: String, measure: (Peer) -> Double)] = [
    ("execute from another thread", "ns/closure", { $0.execute(executeN) }),
    // The same, counting the CPU time of the whole process (sender and
    // loop thread) instead of the wall clock: on a loaded machine the wall
    // clock mostly measures when the scheduler lets the two threads run.
    ("execute, CPU of both threads", "ns CPU/closure", { peer in
        let before = processCPUNs()
        _ = peer.execute(executeN)
        return Double(processCPUNs() - before) / Double(executeN)
    }),
]
for n in scheduleNs {
    rows.append(("scheduleTask add+cancel \(n / 1000)k", "ns/timer", { $0.scheduleCancel(n) }))
}
rows.append(("round trip (submit + wait)", "ns/trip", { $0.roundTrip(tripN) }))
rows.append(("idle CPU", "µs CPU/s", { peer in
    let before = peer.loopThreadCPU()
    usleep(useconds_t(idleSeconds * 1_000_000))
    let after = peer.loopThreadCPU()
    return Double(after - before) / 1000 / idleSeconds
}))

if let only = env("NIOB_ONLY"), !only.isEmpty {
    let words = only.split(separator: ",").map { $0.lowercased() }
    rows = rows.filter { row in words.contains { row.name.lowercased().hasPrefix($0) } }
    if rows.isEmpty {
        print("NIOB_ONLY=\(only): no row starts with any of these words (execute, schedule, round, idle)")
        exit(2)
    }
}

// Warm-up: every path once, small.
for peer in peers {
    _ = peer.execute(1_000); _ = peer.scheduleCancel(1_000); _ = peer.roundTrip(200)
}

// results[row][peer] = one value per round
var results = Array(repeating: Array(repeating: [Double](), count: peers.count), count: rows.count)
for round in 0..<rounds {
    for (r, row) in rows.enumerated() {
        // Peers in a different order each round.
        for k in 0..<peers.count {
            let p = (k + round) % peers.count
            results[r][p].append(row.measure(peers[p]))
        }
    }
}

var uts = utsname()
uname(&uts)
let machine = withUnsafeBytes(of: &uts.machine) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
var load = [Double](repeating: 0, count: 3)
getloadavg(&load, 3)
let cpus = sysconf(Int32(_SC_NPROCESSORS_ONLN))
print("Swift run loops: ours (RLWorkerThread) vs swift-nio EventLoop (MultiThreadedEventLoopGroup, 1 thread) vs Foundation RunLoop")
print(String(format: "%d rounds, medians; %@ with %d CPUs, load %.2f %.2f %.2f", rounds, machine, cpus, load[0], load[1], load[2]))
print("ratio = ours/peer, median of per-round ratios [min-max]; below 1.00 ours is faster")
print("")
func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }
print(pad("row", 32) + lpad("unit", 11) + peers.map { lpad($0.name, 12) }.joined()
    + peers.dropFirst().map { "   " + pad("ours/\($0.name)", 18) }.joined())
/// A CSV field in quotes (row names have commas).
func quoted(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
var csv: [String] = []
for (r, row) in rows.enumerated() {
    let cells = (0..<peers.count).map { median(results[r][$0]) }
    var line = pad(row.name, 32) + lpad(row.unit, 11)
    line += cells.map { lpad(String(format: "%.1f", $0), 12) }.joined()
    for p in 1..<peers.count {
        let ratios = zip(results[r][0], results[r][p]).map { $1 > 0 ? $0 / $1 : .nan }.filter { !$0.isNaN }
        if ratios.isEmpty {
            line += "   " + pad("n/a (both ~0)", 18)
            csv.append("Swift run loops,\(quoted(row.name)),\(peers[p].name),,,,\(cells[0]),\(cells[p]),\(quoted(row.unit))")
            continue
        }
        let (m, lo, hi) = (median(ratios), ratios.min()!, ratios.max()!)
        line += "   " + pad(String(format: "%.2f [%.2f-%.2f]", m, lo, hi), 18)
        csv.append("Swift run loops,\(quoted(row.name)),\(peers[p].name),\(m),\(lo),\(hi),\(cells[0]),\(cells[p]),\(quoted(row.unit))")
    }
    print(line)
}
if let path = env("NIOB_CSV") {
    let header = "group,row,peer,ratio,ratio_min,ratio_max,ours,peer_value,unit"
    let text = ([header] + csv).joined(separator: "\n") + "\n"
    if !FileManager.default.createFile(atPath: path, contents: text.data(using: .utf8)) {
        print("swiftthreads-nio-bench: could not write \(path)")
    }
}
for peer in peers { peer.shutdown() }
