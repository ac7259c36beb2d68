// swiftthreads-memory-bench — the Swift overlay's memory rows: what one more
// timer, one more sleeping loop thread and one more idle connection cost a
// Swift program, as growth of the process's resident set (RSS,
// /proc/self/statm), ours (SwiftThreads) against Foundation and swift-nio.
// The Swift twin of bench/bench_memory.c (the C rows).
//
// Rows (N more after a few of the same, RSS after minus before, over N):
//   timer   N = 100,000 one-shot timers an hour away, not kept by the
//           program (the loop holds them). ours: RLTimer added to the main
//           thread's RLRunLoop; Foundation: Timer added to RunLoop.main;
//           NIO: scheduleTask(in:) on its event loop (from the loop).
//   thread  N = 200 loop threads (default stacks), each asleep with one
//           timer an hour away. ours: RLWorkerThread (an RLThread running
//           its run loop) with an RLTimer; Foundation: a Thread running its
//           RunLoop with a Timer; NIO: a MultiThreadedEventLoopGroup of one
//           thread with a scheduled task.
//   conn    N = 4,000 connections to an echo server on one loop thread,
//           each of which echoed one byte and now waits. ours: RLSocket
//           (a listener with an accept callback, an RLSocket with a data
//           callback per connection, kept in a dictionary); NIO: a
//           ServerBootstrap whose child channels echo (the channel is what
//           the program keeps). Foundation has no socket server. The
//           clients are another process (this program with --client).
//
// Every measurement is a fresh process (this program again with --one ROW
// PEER N), run MEMB_ROUNDS times (default 3, peers interleaved); the table
// shows medians and ours/peer (the median of per-round ratios, below 1:
// ours is lighter).
//   MEMB_ROUNDS=N  MEMB_QUICK=1 (N / 10)  MEMB_ONLY=timer,thread,conn
//   MEMB_CSV=file  one line per row and peer for scripts/bench-chart.py
//   MEMB_DETAIL=1  each measurement also tells (stderr) the growth by size of
//                  anonymous mapping: thread stacks apart from the heap
//                  (ours per thread: 12.2 KB with it and without, since
//                  the RSS is read exactly: rssBytes; its stack, 8,192 B
//                  of it, is the 512 kB mappings)
// Built and run by `make bench-memory-swift` (mk/bench-nio.mk).
import CoreFoundation
import Dispatch
import Foundation
import NIOCore
import NIOPosix
import SwiftThreads

#if canImport(Glibc)
import Glibc
#endif

func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }

/// The resident set, bytes: the "Rss:" of /proc/self/smaps_rollup, which the
/// kernel sums from the page tables (not /proc/self/statm's count: a per-CPU
/// approximation that lags by up to dozens of pages per CPU; the C bench and
/// test_churn read it the same way, Tests/c/support/rssutil.h). The buffer
/// is made before the file is read: a reading grows no heap it measures.
func rssBytes() -> Int {
    var buf = [UInt8](repeating: 0, count: 2048)
    let fd = open("/proc/self/smaps_rollup", O_RDONLY)
    guard fd >= 0 else { return -1 }
    let k = read(fd, &buf, buf.count)
    close(fd)
    guard k > 0 else { return -1 }
    for line in String(decoding: buf[0..<k], as: UTF8.self).split(separator: "\n") where line.hasPrefix("Rss:") {
        let kb = line.dropFirst(4).split(separator: " ").first.flatMap { Int($0) }
        return kb.map { $0 * 1024 } ?? -1
    }
    return -1
}

/// Reads a byte of every page of every executable file mapping (the program,
/// the Swift runtime, Foundation, NIO: every peer's child alike) before the
/// first reading, so that a code page first run between the two readings is
/// not charged to the items.
func prefaultCode() {
    guard let f = fopen("/proc/self/maps", "r") else { return }
    defer { fclose(f) }
    let page = sysconf(Int32(_SC_PAGESIZE))
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), f) != nil {
        let text = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count >= 6, fields[5].hasPrefix("/"), fields[1].count >= 3,
              fields[1].first == "r", fields[1].dropFirst(2).first == "x" else { continue }
        let range = fields[0].split(separator: "-")
        guard range.count == 2, let lo = UInt(range[0], radix: 16), let hi = UInt(range[1], radix: 16) else { continue }
        var a = lo, sum: UInt8 = 0
        while a < hi {
            sum &+= UnsafePointer<UInt8>(bitPattern: a)!.pointee
            a += UInt(page)
        }
        prefaultSink &+= sum
    }
}
/// Where prefaultCode's reads go, so that they are not optimized away.
nonisolated(unsafe) var prefaultSink: UInt8 = 0

func sleepMs(_ ms: Int) { usleep(UInt32(ms * 1000)) }

/// The resident bytes of the process's anonymous mappings, by mapping size
/// (kB): with MEMB_DETAIL=1 a measurement tells which kind of mapping grew
/// (thread stacks have the size of a stack, the heap and its arenas other
/// sizes), to stderr.
func anonymousRSSBySize() -> [Int: Int] {
    guard let f = fopen("/proc/self/smaps", "r") else { return [:] }
    defer { fclose(f) }
    var bySize: [Int: Int] = [:]
    var line = [CChar](repeating: 0, count: 1024)
    var size = 0, anonymous = false
    while fgets(&line, Int32(line.count), f) != nil {
        let text = line.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        if let first = text.first, first.isHexDigit, text.contains("-") {
            // A mapping's first line: its path (if any) is the sixth field.
            anonymous = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).count < 6
        } else if text.hasPrefix("Size:") {
            size = Int(text.split(separator: " ")[1]) ?? 0
        } else if text.hasPrefix("Rss:"), anonymous {
            bySize[size, default: 0] += (Int(text.split(separator: " ")[1]) ?? 0) * 1024
        }
    }
    return bySize
}

let detail = env("MEMB_DETAIL").map { $0 != "" && $0 != "0" } ?? false

/// With MEMB_DETAIL=1: the growth since `before`, per item, by mapping size.
func reportDetail(_ before: [Int: Int], _ n: Int) {
    guard detail else { return }
    let after = anonymousRSSBySize()
    for size in Set(before.keys).union(after.keys).sorted() {
        let grew = (after[size] ?? 0) - (before[size] ?? 0)
        if abs(grew) >= n * 64 {
            FileHandle.standardError.write("  mappings of \(size) kB: \(grew / n) B per item\n".data(using: .utf8)!)
        }
    }
}

/// Raises the soft descriptor limit to what `want` needs (up to the hard one).
func raiseFileLimit(_ want: Int) -> Int {
    var rl = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl) == 0 else { return 1024 }
    if rl.rlim_cur < rlim_t(want) {
        rl.rlim_cur = min(rl.rlim_max, rlim_t(want))
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl)
        _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &rl)
    }
    return Int(rl.rlim_cur)
}

/// A counter that the loop threads raise and the main thread waits on.
final class Ready: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
    /// Waits until `want` (at most 20 s), then a little more, into their waits.
    func wait(for want: Int) -> Bool {
        for _ in 0..<20_000 where value < want { sleepMs(1) }
        sleepMs(200)
        return value >= want
    }
}

// MARK: - Timers

let hour: Double = 3600

func oursTimers(_ n: Int) {
    let loop = RLRunLoop.current
    let due = RLTime.now + hour
    for i in 0..<n {
        _ = loop.add(RLTimer(fire: due + Double(i) * 1e-3, interval: 0, repeats: false) { _ in }, forMode: .default)
    }
}

func foundationTimers(_ n: Int) {
    let loop = RunLoop.current
    let due = Date(timeIntervalSinceNow: hour)
    for i in 0..<n {
        loop.add(Timer(fire: due.addingTimeInterval(Double(i) * 1e-3), interval: 0, repeats: false) { _ in },
                 forMode: .default)
    }
}

final class NIOTimers: Sendable {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    func add(_ n: Int) {
        let loop = group.next()
        try! loop.submit {
            for i in 0..<n {
                _ = loop.scheduleTask(in: .hours(1) + .milliseconds(Int64(i))) {}
            }
        }.wait()
    }
}

func measureTimers(_ peer: String, _ n: Int) -> Double? {
    let add: (Int) -> Void
    switch peer {
    case "ours": add = oursTimers
    case "Foundation": add = foundationTimers
    case "NIO":
        let nio = NIOTimers()
        add = nio.add
    default: return nil
    }
    add(1000)
    let d0 = detail ? anonymousRSSBySize() : [:]
    prefaultCode()
    let r0 = rssBytes()
    add(n)
    let r1 = rssBytes()
    reportDetail(d0, n)
    return Double(r1 - r0) / Double(n)
}

// MARK: - Loop threads

/// Starts one loop thread asleep with one timer; kept in `keep`.
final class Keep: @unchecked Sendable {
    var objects: [AnyObject] = []
    var groups: [MultiThreadedEventLoopGroup] = []
}

func oursThread(_ keep: Keep, _ ready: Ready) {
    let worker = RLWorkerThread(name: "memb")
    try! worker.start()
    try! worker.async {
        _ = RLRunLoop.current.add(RLTimer(fire: RLTime.now + hour, interval: 0, repeats: false) { _ in },
                                  forMode: .default)
        ready.add()
    }
    keep.objects.append(worker)
}

func foundationThread(_ keep: Keep, _ ready: Ready) {
    let thread = Thread {
        let loop = RunLoop.current
        loop.add(Timer(timeInterval: hour, repeats: false) { _ in }, forMode: .default)
        ready.add()
        while true { _ = loop.run(mode: .default, before: .distantFuture) }
    }
    thread.start()
    keep.objects.append(thread)
}

func nioThread(_ keep: Keep, _ ready: Ready) {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop = group.next()
    loop.execute {
        _ = loop.scheduleTask(in: .hours(1)) {}
        ready.add()
    }
    keep.groups.append(group)
}

func measureThreads(_ peer: String, _ n: Int) -> Double? {
    let start: (Keep, Ready) -> Void
    switch peer {
    case "ours": start = oursThread
    case "Foundation": start = foundationThread
    case "NIO": start = nioThread
    default: return nil
    }
    let keep = Keep(), ready = Ready()
    for _ in 0..<4 { start(keep, ready) }
    guard ready.wait(for: 4) else { return nil }
    let d0 = detail ? anonymousRSSBySize() : [:]
    prefaultCode()
    let r0 = rssBytes()
    for _ in 0..<n { start(keep, ready) }
    guard ready.wait(for: 4 + n) else { return nil }
    let r1 = rssBytes()
    reportDetail(d0, n)
    return Double(r1 - r0) / Double(n)
}

// MARK: - Echo servers

/// Our server's connections, touched on its loop's thread only.
final class Connections: @unchecked Sendable {
    var sockets: [Int32: RLSocket] = [:]
}

/// An RLSocket echo server on a worker thread's loop; returns its port.
func oursServer(_ keep: Keep) -> UInt16? {
    let worker = RLWorkerThread(name: "echo")
    try! worker.start()
    let conns = Connections()
    let port: UInt16? = try? worker.sync {
        let listener = try RLSocket(callBackTypes: .accept) { _, event in
            guard case .accept(let fd, _) = event else { return }
            guard let conn = try? RLSocket(nativeHandle: fd, callBackTypes: .data, callBack: { sock, event in
                guard case .data(let data, _) = event else { return }
                if data.count == 0 {
                    conns.sockets[sock.nativeHandle] = nil
                    return
                }
                try? sock.send(data)
            }) else {
                close(fd)
                return
            }
            conns.sockets[fd] = conn
            _ = RLRunLoop.current.add(conn, forMode: .default)
        }
        try listener.setAddress(.ipv4(loopbackPort: 0))
        _ = RLRunLoop.current.add(listener, forMode: .default)
        keep.objects.append(listener)
        return listener.address?.port
    }
    keep.objects.append(worker)
    keep.objects.append(conns)
    return port
}

final class EchoHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.writeAndFlush(data, promise: nil)
    }
}

func nioServer(_ keep: Keep) -> UInt16? {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    keep.groups.append(group)
    let bootstrap = ServerBootstrap(group: group)
        .serverChannelOption(.backlog, value: 1024)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(EchoHandler())
            }
        }
    guard let channel = try? bootstrap.bind(host: "127.0.0.1", port: 0).wait() else { return nil }
    keep.objects.append(channel as AnyObject)
    return channel.localAddress?.port.map { UInt16($0) }
}

/// The client process: this program with --client PORT. For each count it
/// reads on stdin, that many blocking connections that each send a byte
/// and read it back, kept open; then the count (or -1) on stdout.
func clientMain(port: UInt16) -> Never {
    _ = raiseFileLimit(65536)
    var fds: [Int32] = []
    var n = 0
    while read(0, &n, MemoryLayout<Int>.size) == MemoryLayout<Int>.size {
        var ok = n
        for _ in 0..<n {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            sin.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            let rc = withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            var byte: UInt8 = 0x78
            if fd < 0 || rc != 0 || write(fd, &byte, 1) != 1 || read(fd, &byte, 1) != 1 {
                ok = -1
                break
            }
            fds.append(fd)
        }
        guard write(1, &ok, MemoryLayout<Int>.size) == MemoryLayout<Int>.size else { exit(1) }
    }
    exit(0)
}

/// Starts a process running this program with `args`, with pipes to its
/// stdin and from its stdout.
func spawn(_ args: [String]) -> (pid: pid_t, stdin: Int32, stdout: Int32)? {
    var toChild: [Int32] = [0, 0], fromChild: [Int32] = [0, 0]
    guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { return nil }
    // Only the child's two ends go to it (as its stdin and stdout).
    for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
    posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
    let argv = ([CommandLine.arguments[0]] + args).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid = pid_t()
    let rc = posix_spawn(&pid, "/proc/self/exe", &actions, nil, argv, environ)
    close(toChild[0])
    close(fromChild[1])
    guard rc == 0 else {
        close(toChild[1])
        close(fromChild[0])
        return nil
    }
    return (pid, toChild[1], fromChild[0])
}

func measureConns(_ peer: String, _ wanted: Int) -> Double? {
    let limit = raiseFileLimit(wanted + 128)
    let n = min(wanted, limit - 128)
    if n < wanted {
        FileHandle.standardError.write("memory bench: descriptor limit \(limit): \(n) connections\n".data(using: .utf8)!)
    }
    guard n > 100 else { return nil }
    let keep = Keep()
    let port: UInt16?
    switch peer {
    case "ours": port = oursServer(keep)
    case "NIO": port = nioServer(keep)
    default: return nil
    }
    guard let port, let client = spawn(["--client", String(port)]) else { return nil }
    defer {
        kill(client.pid, SIGKILL)
        var status: Int32 = 0
        waitpid(client.pid, &status, 0)
    }
    func connectN(_ count: Int) -> Bool {
        var c = count, got = 0
        return write(client.stdin, &c, MemoryLayout<Int>.size) == MemoryLayout<Int>.size
            && read(client.stdout, &got, MemoryLayout<Int>.size) == MemoryLayout<Int>.size && got == count
    }
    guard connectN(16) else { return nil }
    sleepMs(100)
    prefaultCode()
    let r0 = rssBytes()
    guard connectN(n) else { return nil }
    sleepMs(200)
    return Double(rssBytes() - r0) / Double(n)
}

// MARK: - One measurement, in a fresh process

let rowNames = ["timer", "thread", "conn"]
let rowLabels = [
    "per timer, 100,000 on one loop (B)",
    "per sleeping loop thread, one timer (B)",
    "per idle connection that echoed 1 byte, 4,000 (B)",
]
let rowN = [100_000, 200, 4_000]
let peerNames = ["ours", "Foundation", "NIO"]

func applies(_ row: String, _ peer: String) -> Bool { !(row == "conn" && peer == "Foundation") }

let args = CommandLine.arguments
if args.count == 3 && args[1] == "--client", let port = UInt16(args[2]) {
    clientMain(port: port)
}
if args.count == 5 && args[1] == "--one", let n = Int(args[4]) {
    alarm(120)
    let value: Double?
    switch args[2] {
    case "timer": value = measureTimers(args[3], n)
    case "thread": value = measureThreads(args[3], n)
    case "conn": value = measureConns(args[3], n)
    default: value = nil
    }
    guard let value else { exit(1) }
    print(String(format: "%.1f", value))
    fflush(nil)
    _exit(0) // threads still run: no exit handlers
}

// MARK: - The driver

func listed(_ variable: String, _ name: String) -> Bool {
    guard let s = env(variable), !s.isEmpty else { return true }
    return s.split(separator: ",").contains { $0.lowercased() == name.lowercased() }
}

/// One fresh process: its printed value, or NaN if it failed.
func runChild(_ row: String, _ peer: String, _ n: Int) -> Double {
    guard let child = spawn(["--one", row, peer, String(n)]) else { return .nan }
    close(child.stdin)
    var out = [UInt8]()
    var buf = [UInt8](repeating: 0, count: 256)
    while true {
        let k = read(child.stdout, &buf, buf.count)
        if k <= 0 { break }
        out += buf[0..<k]
    }
    close(child.stdout)
    var status: Int32 = 0
    waitpid(child.pid, &status, 0)
    let text = String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    return (status == 0 ? Double(text) : nil) ?? .nan
}

func median(_ v: [Double]) -> Double {
    let s = v.filter { $0.isFinite }.sorted()
    return s.isEmpty ? .nan : (s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2)
}

func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }
func quoted(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

let quick = env("MEMB_QUICK").map { $0 != "" && $0 != "0" } ?? false
let rounds = max(1, min(64, Int(env("MEMB_ROUNDS") ?? "") ?? 3))
print("Swift memory: RSS growth per item, median of \(rounds) fresh processes (bytes)")
print(pad("", 52) + peerNames.map { lpad($0, 11) }.joined() + "   ours/Foundation   ours/NIO")
var csv: [String] = []
var failures = 0
for (r, row) in rowNames.enumerated() where listed("MEMB_ONLY", row) {
    let n = quick ? rowN[r] / 10 : rowN[r]
    var values = [[Double]](repeating: [], count: peerNames.count)
    for i in 0..<rounds {
        for k in 0..<peerNames.count {
            let p = (k + i) % peerNames.count
            guard applies(row, peerNames[p]) else { continue }
            let v = runChild(row, peerNames[p], n)
            if v.isNaN { failures += 1 }
            values[p].append(v)
        }
    }
    let meds = values.map(median)
    var line = pad(rowLabels[r], 52)
    for p in 0..<peerNames.count {
        line += lpad(!applies(row, peerNames[p]) ? "n/a" : meds[p].isNaN ? "failed" : String(format: "%.0f", meds[p]), 11)
    }
    for p in 1..<peerNames.count {
        guard applies(row, peerNames[p]) else {
            line += "   " + pad("n/a", 15)
            continue
        }
        let ratios = zip(values[0], values[p]).map { $1 > 0 ? $0 / $1 : .nan }.filter { $0.isFinite && $0 > 0 }
        let ours = meds[0].isNaN ? "" : String(meds[0]), theirs = meds[p].isNaN ? "" : String(meds[p])
        if ratios.isEmpty {
            line += "   " + pad("n/a", 15)
            csv.append("Swift memory,\(quoted(rowLabels[r])),\(peerNames[p]),,,,\(ours),\(theirs),\"B\"")
        } else {
            let (m, lo, hi) = (median(ratios), ratios.min()!, ratios.max()!)
            line += "   " + pad(String(format: "%.2fx", m), 15)
            csv.append("Swift memory,\(quoted(rowLabels[r])),\(peerNames[p]),\(m),\(lo),\(hi),\(ours),\(theirs),\"B\"")
        }
    }
    print(line)
    fflush(nil)
}
print("[RSS growth of a fresh process over N more after a few; default stacks; Foundation has no socket server]")
if let path = env("MEMB_CSV") {
    let header = "group,row,peer,ratio,ratio_min,ratio_max,ours,peer_value,unit"
    let text = ([header] + csv).joined(separator: "\n") + "\n"
    if !FileManager.default.createFile(atPath: path, contents: text.data(using: .utf8)) {
        print("swiftthreads-memory-bench: could not write \(path)")
    }
}
exit(failures == 0 ? 0 : 1)
