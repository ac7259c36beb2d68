// swiftthreads-message-ports — the Threading Programming Guide's check-in
// through message ports (Listings 3-17 to 3-19: CFMessagePort, here
// RLMessagePort) in Swift, the twin of examples/c/message_ports.c, printing
// the same lines. The worker is first a thread, then a second process (this
// program, spawned as `--worker MAINPORT`):
//
//   - the main thread opens a local port under a name and runs its loop;
//   - the worker opens a local port of its own and checks in: a one-way
//     message to the main port (a remote port made from its name) that
//     carries the worker port's name;
//   - the main thread makes a remote port from that name and sends it
//     requests (msgid 200), each answered with a reply, then a quit
//     message (msgid 300) that ends the worker's run loop.
import ExampleSupport
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

enum Msg {
    static let checkin: RLMessageID = 100, request: RLMessageID = 200, quit: RLMessageID = 300
}

func text(_ bytes: [UInt8]?) -> String { bytes.map { String(decoding: $0, as: UTF8.self) } ?? "(none)" }

/// The worker: its own local port, the check-in, then its run loop until
/// the quit message. Runs on a thread, or as the whole second process.
func runWorker(mainPortName: String, tag: String) -> Bool {
    let name = "com.MyApp.Thread-\(tag)"
    let quit = RLAtomicInt32(0)
    let port: RLMessagePort
    do {
        port = try RLMessagePort(local: name) { msgid, data in
            switch msgid {
            case Msg.request:
                say("[worker] request \(msgid): \"\(text(data))\"")
                return Array("done: \(text(data)) (by \(name))".utf8)
            case Msg.quit:
                say("[worker] quit: leaving the run loop")
                _ = quit.add(1)
                return nil
            default:
                return nil
            }
        }
    } catch {
        say("[worker] cannot open \(name): \(error)")
        return false
    }
    RLRunLoop.current.add(port, forMode: .default)
    do {
        // Listing 3-19: check in with the main thread, giving our name.
        let main = try RLMessagePort(remote: mainPortName)
        try main.send(msgid: Msg.checkin, data: Array(name.utf8), timeout: 10)
    } catch {
        say("[worker] check-in failed: \(error)")
        port.invalidate()
        return false
    }
    while quit.load() == 0 {
        _ = try? RLRunLoop.current.run(mode: .default, for: 10, returnAfterSourceHandled: true)
    }
    port.invalidate()
    return true
}

/// Starts this program again as `--worker NAME`; its pid.
func spawnWorkerProcess(mainPortName: String) -> pid_t? {
    let path = "/proc/self/exe"
    let arguments = [CommandLine.arguments[0], "--worker", mainPortName]
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let status = posix_spawn(&pid, path, nil, nil, &argv, environ)
    guard status == 0 else {
        say("[main] posix_spawn: \(String(cString: strerror(status)))")
        return nil
    }
    return pid
}

/// One flow: the main port, the worker (a thread or a process), its
/// check-in, three requests and the quit message. True if all went well.
func flow(process: Bool) -> Bool {
    say("== flow: the worker is a \(process ? "second process" : "thread") ==")
    let mainName = "com.MyApp.Main-\(getpid())-\(process ? "p" : "t")"
    // Listing 3-17: the main thread's local port; the check-in names the
    // worker's port.
    let checkedIn = ThreadSafeBox<String?>(nil)
    let mainPort: RLMessagePort
    do {
        mainPort = try RLMessagePort(local: mainName) { msgid, data in
            if msgid == Msg.checkin { checkedIn.set(text(data)) }
            return nil
        }
    } catch {
        say("[main] cannot open \(mainName): \(error)")
        return false
    }
    defer { mainPort.invalidate() }
    RLRunLoop.current.add(mainPort, forMode: .default)

    var thread: RLThread?
    var pid: pid_t?
    if process {
        pid = spawnWorkerProcess(mainPortName: mainName)
        if pid == nil { return false }
    } else {
        let worker = RLThread(returning: { runWorker(mainPortName: mainName, tag: "\(getpid())") })
        do { try worker.start() } catch { return false }
        thread = worker
    }

    let deadline = RLTime.now + 30
    while checkedIn.get() == nil && RLTime.now < deadline {
        _ = try? RLRunLoop.current.run(mode: .default, for: 1, returnAfterSourceHandled: true)
    }
    guard let workerName = checkedIn.get() else {
        say("[main] no check-in")
        return false
    }
    say("[main] checked in: \(workerName)")
    var ok = true
    do {
        // Listing 3-18's requests, through a remote port to the worker.
        let worker = try RLMessagePort(remote: workerName)
        for job in 1...3 {
            do {
                let reply = try worker.sendRequest(msgid: Msg.request, data: Array("job \(job)".utf8), timeout: 10)
                say("[main] reply \(job): \"\(text(reply))\"")
            } catch {
                say("[main] request \(job) failed: \(error)")
                ok = false
            }
        }
        do {
            try worker.send(msgid: Msg.quit, timeout: 10)
            say("[main] quit sent: ok")
        } catch {
            say("[main] quit sent: failed")
            ok = false
        }
    } catch {
        say("[main] cannot reach \(workerName): \(error)")
        ok = false
    }
    if let pid {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = (status & 0x7f) == 0
        let code = exited ? (status >> 8) & 0xff : -1
        say("[main] worker process exited with status \(code)")
        ok = ok && code == 0
    }
    if let thread {
        let result = (try? thread.join(as: Bool.self)) ?? nil
        say("[main] worker thread finished")
        ok = ok && result == true
    }
    return ok
}

/// A value the main thread and a port's callout share.
final class ThreadSafeBox<Value: Sendable>: @unchecked Sendable {
    private let lock = RLLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
}

let arguments = CommandLine.arguments
if let index = arguments.firstIndex(of: "--worker"), index + 1 < arguments.count {
    // The second process: the worker, then exit.
    let ok = runWorker(mainPortName: arguments[index + 1], tag: "\(getpid())")
    say("[worker] run loop returned; process exits")
    exit(ok ? 0 : 1)
}

say("message ports (Listings 3-17 to 3-19), \(Pace.current.rawValue) pace")
let threadFlow = flow(process: false)
let processFlow = flow(process: true)
say("== end ==")
say("swiftthreads-message-ports: \(threadFlow && processFlow ? "OK" : "FAILED")")
exit(threadFlow && processFlow ? 0 : 1)
