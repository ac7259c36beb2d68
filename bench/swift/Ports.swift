// Socket ports: RLSocketPort against Foundation's SocketPort, in one process
// over loopback (`make bench-ports-swift`, or BSW_ONLY=ports swiftthreads-bench).
//
// Rows (each BSP_ROUNDS rounds, default 5, ours and Foundation's alternating
// in each round; cells are medians over rounds; BSP_QUICK=1 a tenth of the
// counts; BSP_TRACE=1 names each phase on stderr as it starts):
//   - round trip: a message with a 32-byte data component from this thread
//     to a local socket port served by another thread's run loop, and a
//     reply with the same bytes back to this thread's local socket port;
//   - the same with a 4 KB component (larger ones are often split across
//     reads, which Foundation drops: its trip then waits for nothing);
//   - one-way messages per second, sent back to back to the other thread's
//     port, until the last has been handled.
// Both sides reply through a remote port the serving thread made for the
// client's port beforehand: Foundation on Linux does not carry a message's
// `from:` port (see docs/swift-mapping.md), so `message.sendPort` cannot be
// used there. 32 bytes, not 16: Foundation drops a message under 52 bytes
// on the wire. Foundation has no streaming row: two messages that reach it
// in one read crash the receiving process.
import Foundation
import SwiftThreads

#if canImport(Glibc)
import Glibc
#endif

/// A counter and a flag shared with a serving thread (ordered by the
/// mutex).
final class PortBenchState: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var _count = 0
    private var _stop = false
    init() { pthread_mutex_init(mutex, nil) }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    private func locked<R>(_ body: () -> R) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }
    func bump() { locked { _count += 1 } }
    var count: Int { locked { _count } }
    func stop() { locked { _stop = true } }
    var stopped: Bool { locked { _stop } }
}

/// A pthread running `body` (joined by `join`).
final class PortBenchThread: @unchecked Sendable {
    private var thread = pthread_t()
    private let body: () -> Void
    init(_ body: @escaping () -> Void) {
        self.body = body
        let arg = Unmanaged.passRetained(self).toOpaque()
        pthread_create(&thread, nil, { arg in
            Unmanaged<PortBenchThread>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, arg)
    }
    func join() { pthread_join(thread, nil) }
}

private func tcpPortOf(_ address: Data) -> UInt16 { UInt16(address[address.startIndex + 2]) << 8 | UInt16(address[address.startIndex + 3]) }

// MARK: Foundation's side

final class FoundationEcho: NSObject, PortDelegate, @unchecked Sendable {
    let state: PortBenchState
    var replyTo: SocketPort?
    init(_ state: PortBenchState) { self.state = state }
    func handle(_ message: PortMessage) {
        state.bump()
        if let replyTo {
            _ = replyTo.send(before: Date(timeIntervalSinceNow: 10), msgid: Int(message.msgid),
                             components: NSMutableArray(array: message.components ?? []), from: nil, reserved: 0)
        }
    }
}

final class FoundationCounter: NSObject, PortDelegate, @unchecked Sendable {
    var replies = 0
    func handle(_ message: PortMessage) { replies += 1 }
}

/// A serving thread with a Foundation local socket port; replies go to
/// `clientTCP` on loopback (0: no replies).
final class FoundationServer: @unchecked Sendable {
    let state = PortBenchState()
    private(set) var tcp: UInt16 = 0
    private var thread: PortBenchThread!

    init(clientTCP: UInt16) {
        let ready = DispatchSemaphore(value: 0)
        thread = PortBenchThread { [self] in
            let port = SocketPort(tcpPort: 0)!
            let echo = FoundationEcho(state)
            if clientTCP != 0 { echo.replyTo = SocketPort(remoteWithTCPPort: clientTCP, host: "127.0.0.1") }
            port.setDelegate(echo)
            RunLoop.current.add(port, forMode: .default)
            tcp = tcpPortOf(port.address)
            ready.signal()
            while !state.stopped { _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.1)) }
            // Foundation crashes when a port still in a run loop is invalidated.
            RunLoop.current.remove(port, forMode: .default)
            port.invalidate()
            withExtendedLifetime(echo) {}
        }
        ready.wait()
    }

    func stop() {
        state.stop()
        thread.join()
    }
}

/// Replies Foundation lost (a trip that got none within a second), for the
/// table's note.
nonisolated(unsafe) var foundationLost = 0

/// Round trips with Foundation's SocketPort: microseconds each (a lost
/// reply ends its trip after a second, and is counted in foundationLost).
func foundationSocketRoundTrip(bytes: Int, _ n: Int) -> Double {
    let mine = SocketPort(tcpPort: 0)!
    let counter = FoundationCounter()
    mine.setDelegate(counter)
    RunLoop.current.add(mine, forMode: .default)
    let server = FoundationServer(clientTCP: tcpPortOf(mine.address))
    let remote = SocketPort(remoteWithTCPPort: server.tcp, host: "127.0.0.1")!
    let payload = Data(repeating: 7, count: bytes)
    func trip() {
        let want = counter.replies + 1
        _ = remote.send(before: Date(timeIntervalSinceNow: 10), msgid: 1, components: NSMutableArray(array: [payload]),
                        from: mine, reserved: 0)
        let giveUp = nowNs() + 1_000_000_000
        while counter.replies < want {
            if nowNs() > giveUp {
                foundationLost += 1
                counter.replies = want  // a late reply, if any, is counted for the next trip
                return
            }
            _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.1))
        }
    }
    for _ in 0..<max(1, n / 10) { trip() }  // connections made, caches warm
    let t0 = nowNs()
    for _ in 0..<n { trip() }
    let us = Double(nowNs() - t0) / Double(n) / 1e3
    server.stop()
    RunLoop.current.remove(mine, forMode: .default)
    mine.invalidate()
    return us
}

// MARK: Our side

/// A serving thread with an RLSocketPort; replies go to `clientTCP` on
/// loopback (0: no replies).
final class OurSocketServer: @unchecked Sendable {
    let state = PortBenchState()
    let port: RLSocketPort
    private var thread: PortBenchThread!

    init(clientTCP: UInt16) {
        let port = try! RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        self.port = port
        let ready = DispatchSemaphore(value: 0)
        let state = state
        let replyTo = clientTCP == 0 ? nil : try! RLSocketPort(remoteHost: "127.0.0.1", tcpPort: clientTCP)
        port.setHandler { message in
            state.bump()
            if let replyTo {
                _ = replyTo.send(before: RLTime.now + 10, msgid: Int(message.msgid), components: message.components,
                                 from: nil, reserved: 0)
            }
        }
        thread = PortBenchThread {
            RLRunLoop.current.add(port, forMode: .default)
            ready.signal()
            while !state.stopped { _ = RLRunLoop.current.run(mode: .default, before: RLTime.now + 0.1) }
        }
        ready.wait()
    }

    func stop() {
        state.stop()
        thread.join()
        port.invalidate()
    }
}

/// Round trips with RLSocketPort: microseconds each.
func ourSocketRoundTrip(bytes: Int, _ n: Int) -> Double {
    let mine = try! RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
    let replies = PortBenchState()
    mine.setHandler { _ in replies.bump() }
    RLRunLoop.current.add(mine, forMode: .default)
    let server = OurSocketServer(clientTCP: mine.tcpPort)
    let remote = try! RLSocketPort(remoteHost: "127.0.0.1", tcpPort: server.port.tcpPort)
    let payload: [RLPortComponent] = [.bytes([UInt8](repeating: 7, count: bytes))]
    func trip() {
        let want = replies.count + 1
        _ = remote.send(before: RLTime.now + 10, msgid: 1, components: payload, from: mine, reserved: 0)
        while replies.count < want { _ = RLRunLoop.current.run(mode: .default, before: RLTime.now + 1) }
    }
    for _ in 0..<max(1, n / 10) { trip() }
    let t0 = nowNs()
    for _ in 0..<n { trip() }
    let us = Double(nowNs() - t0) / Double(n) / 1e3
    server.stop()
    mine.invalidate()
    return us
}

/// One-way messages per second with RLSocketPort, back to back.
func ourSocketStream(_ n: Int) -> Double {
    let server = OurSocketServer(clientTCP: 0)
    let remote = try! RLSocketPort(remoteHost: "127.0.0.1", tcpPort: server.port.tcpPort)
    let payload: [RLPortComponent] = [.bytes([UInt8](repeating: 7, count: 32))]
    _ = remote.send(before: RLTime.now + 10, msgid: 1, components: payload, from: nil, reserved: 0)
    while server.state.count < 1 { usleep(100) }
    let t0 = nowNs()
    for _ in 0..<n { _ = remote.send(before: RLTime.now + 10, msgid: 1, components: payload, from: nil, reserved: 0) }
    while server.state.count < n + 1 { usleep(50) }
    let rate = Double(n) / (Double(nowNs() - t0) / 1e9)
    server.stop()
    return rate
}

// MARK: The table

/// A value right-aligned in `width`, two decimals.
func portCell(_ v: Double, _ width: Int) -> String {
    let s = v.isNaN ? "-" : String(format: "%.2f", v)
    return String(repeating: " ", count: max(0, width - s.count)) + s
}

func runPortBench(_ env: [String: String]) {
    let rounds = max(1, min(15, Int(env["BSP_ROUNDS"] ?? "") ?? 5))
    let quick = env["BSP_QUICK"] != nil
    let trips = quick ? 300 : 3000, bigTrips = quick ? 100 : 1000, stream = quick ? 20_000 : 200_000
    var ours: [[Double]] = [[], [], []], theirs: [[Double]] = [[], []]
    for round in 0..<rounds {
        FileHandle.standardError.write("\rswiftthreads-bench ports: round \(round + 1)/\(rounds)".data(using: .utf8)!)
        func trace(_ what: String) {
            if env["BSP_TRACE"] != nil { FileHandle.standardError.write("\(what)\n".data(using: .utf8)!) }
        }
        trace("32-byte round trips")
        if round % 2 == 0 {
            ours[0].append(ourSocketRoundTrip(bytes: 32, trips))
            theirs[0].append(foundationSocketRoundTrip(bytes: 32, trips))
            trace("4 KB round trips")
            ours[1].append(ourSocketRoundTrip(bytes: 4_096, bigTrips))
            trace("4 KB round trips, Foundation")
            theirs[1].append(foundationSocketRoundTrip(bytes: 4_096, bigTrips))
        } else {
            theirs[0].append(foundationSocketRoundTrip(bytes: 32, trips))
            ours[0].append(ourSocketRoundTrip(bytes: 32, trips))
            theirs[1].append(foundationSocketRoundTrip(bytes: 4_096, bigTrips))
            ours[1].append(ourSocketRoundTrip(bytes: 4_096, bigTrips))
        }
        trace("stream")
        ours[2].append(ourSocketStream(stream))
    }
    FileHandle.standardError.write("\r\u{1b}[K".data(using: .utf8)!)
    var load = [Double](repeating: .nan, count: 3)
    getloadavg(&load, 3)
    print("""

    Socket ports: RLSocketPort vs Foundation's SocketPort, one process over loopback; median of \(rounds) rounds,
    \(ProcessInfo.processInfo.activeProcessorCount) CPUs, load average \(String(format: "%.1f", load[0]))

    """)
    let rows: [(String, Double, Double?)] = [
        ("message + reply, 32-byte data, two threads (us)", median(ours[0]), median(theirs[0])),
        ("message + reply, 4 KB data, two threads (us)", median(ours[1]), median(theirs[1])),
        ("one-way messages, 32-byte data, back to back (k msg/s)", median(ours[2]) / 1e3, nil),
    ]
    print(pad("row", 56) + " | " + pad("RLSocketPort", 12) + " | " + pad("SocketPort", 12) + " | ratio")
    print(String(repeating: "-", count: 56) + "-+-" + String(repeating: "-", count: 12) + "-+-"
          + String(repeating: "-", count: 12) + "-+------")
    for (name, mine, peer) in rows {
        let peerCell = peer.map { portCell($0, 12) } ?? pad("crashes [a]", 12)
        let ratio = peer.map { String(format: "%.2fx", mine / $0) } ?? ""
        print(pad(name, 56) + " | " + portCell(mine, 12) + " | " + peerCell + " | " + ratio)
    }
    print("""

    ratio: ours / Foundation in time (lower is better). Both reply through a remote port made beforehand
    (Foundation on Linux does not carry `from:`). [a] Foundation's receiver crashes when two messages arrive
    in one read, so it has no streaming row. Foundation lost \(foundationLost) repl\(foundationLost == 1 ? "y" : "ies") in this
    run (a message split across reads is dropped there; each loss costs its trip a second).
    """)
}
