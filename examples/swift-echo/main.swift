// swiftthreads-echo-client — the Cocoa tutorial's "Echo Client using
// NSStream and NSRunLoop" in Swift, with SwiftThreads' Foundation-shaped
// streams: lines read from standard input are sent to an echo server and
// what comes back is printed, all driven by stream events on the main run
// loop.
//
//   swiftthreads-echo-client HOST PORT   talk to a running echo server
//                                        (examples/c's echo_server, nc -l, …)
//   swiftthreads-echo-client             start an echo server in this process
//                                        (an RLSocket on a worker thread) and
//                                        talk to it
//
// At the end of standard input the client closes its sending side; the
// server then closes the connection, and the client exits once every echo
// has arrived. SIGINT (Ctrl-C) or SIGTERM ends it early and cleanly: they
// arrive as an async sequence of signals (RLSignals) read by the main run
// loop.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ExampleSupport
import SwiftThreads

// MARK: - The client

/// The tutorial's client object: the delegate of both streams. Everything it
/// does runs on the main thread (its run loop delivers the stream events and
/// the standard-input readiness), which is what makes it safe to hand to the
/// `@Sendable` callbacks.
final class EchoClient: RLStreamDelegate, @unchecked Sendable {
    private let input: RLInputStream
    private let output: RLOutputStream
    private let endpoint: String
    private var pending: [UInt8] = []   // read from stdin, not sent yet
    private var received: [UInt8] = []  // echoed, not printed yet (no newline yet)
    private var stdinEnded = false
    private var outputOpened = false
    private var outputClosed = false
    private var canWrite = false
    private(set) var finished = false
    private(set) var failed = false

    init(host: String, port: Int) {
        var input: RLInputStream?
        var output: RLOutputStream?
        RLStream.getStreamsToHost(withName: host, port: port, inputStream: &input, outputStream: &output)
        guard let input, let output else {
            say("cannot make streams to \(host):\(port)")
            exit(2)
        }
        self.input = input
        self.output = output
        endpoint = "\(host):\(port)"
        for stream in [input, output] as [RLStream] {
            stream.delegate = self
            stream.schedule(in: .current, forMode: .default)
            stream.open()
        }
    }

    // MARK: Stream events (Foundation's stream(_:handle:))

    func stream(_ aStream: RLStream, handle eventCode: RLStream.Event) {
        switch eventCode {
        case .openCompleted where aStream === output:
            say("connected to \(endpoint)")
            outputOpened = true
            sendPending()
        case .hasBytesAvailable:
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = input.read(&buffer, maxLength: buffer.count)
            if n > 0 { printEchoes(buffer.prefix(n)) }
        case .hasSpaceAvailable:
            canWrite = true
            sendPending()
        case .errorOccurred:
            say("stream error: \(aStream.streamError.map { "\($0)" } ?? "unknown")")
            failed = true
            finish()
        case .endEncountered:
            if !received.isEmpty { say("echo: \(String(decoding: received, as: UTF8.self))") }
            say("the server closed the connection")
            finish()
        default:
            break
        }
    }

    private func printEchoes<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        received += bytes
        while let newline = received.firstIndex(of: UInt8(ascii: "\n")) {
            say("echo: \(String(decoding: received[..<newline], as: UTF8.self))")
            received.removeSubrange(...newline)
        }
    }

    // MARK: Standard input

    /// Lines typed (or piped) in, to send.
    func takeInput(_ bytes: [UInt8]) {
        pending += bytes
        sendPending()
    }

    /// Standard input ended: once everything is sent, close the sending side.
    func inputEnded() {
        stdinEnded = true
        sendPending()
    }

    private func sendPending() {
        while canWrite && !pending.isEmpty {
            let n = output.write(pending, maxLength: pending.count)
            guard n > 0 else { break }
            pending.removeFirst(n)
            // One write per hasSpaceAvailable, as in the tutorial: the next
            // event says when there is room again.
            canWrite = false
        }
        // Closed only once open: closing a socket stream that is still
        // connecting would not tell the server anything.
        if stdinEnded && pending.isEmpty && outputOpened && !outputClosed {
            outputClosed = true
            output.close()
            output.remove(from: .current, forMode: .default)
        }
    }

    func finish() {
        guard !finished else { return }
        finished = true
        for stream in [input, output] as [RLStream] {
            stream.close()
            stream.remove(from: .current, forMode: .default)
        }
        RLRunLoop.current.stop()
    }
}

// MARK: - The in-process echo server

/// An echo server on a worker thread's run loop: an RLSocket accepts, and
/// each connection is an RLSocket whose data callback sends the bytes back.
final class EchoServer: Sendable {
    private let worker = RLWorkerThread(name: "echo server")
    private let listener: RLSocket
    let port: UInt16

    init() throws {
        try worker.start()
        listener = try RLSocket(callBackTypes: .accept) { _, event in
            guard case .accept(let fd, _) = event else { return }
            let connection = try? RLSocket(nativeHandle: fd, callBackTypes: .data) { connection, event in
                guard case .data(let bytes, _) = event else { return }
                // Empty: the client closed its side. Echo, or close.
                if bytes.isEmpty || (try? connection.send(bytes)) == nil { connection.invalidate() }
            }
            guard let connection else {
                close(fd)
                return
            }
            RLRunLoop.current.add(connection, forMode: .default)
        }
        try listener.setAddress(.ipv4(loopbackPort: 0))
        port = listener.address?.port ?? 0
        worker.runLoop?.add(listener, forMode: .default)
    }

    func stop() {
        listener.invalidate()
        try? worker.stop()
    }
}

// MARK: - Main

func main() -> Int32 {
    // First, before any thread exists: the signals are blocked in this
    // thread and in every thread started from now on, so that only the
    // run loop's signalfd sees them.
    guard let signals = try? RLSignals(SIGINT, SIGTERM, runLoop: .main) else {
        say("cannot watch SIGINT and SIGTERM: \(RLError.last())")
        return 1
    }
    let arguments = CommandLine.arguments.dropFirst()
    var server: EchoServer?
    let host: String
    let port: Int
    if arguments.count == 2, let number = Int(arguments.last!) {
        host = arguments.first!
        port = number
    } else if arguments.isEmpty {
        do {
            server = try EchoServer()
        } catch {
            say("cannot start the echo server: \(error)")
            return 1
        }
        host = "127.0.0.1"
        port = Int(server!.port)
        say("echo server (in this process) listening on \(port)")
    } else {
        say("usage: swiftthreads-echo-client [HOST PORT]")
        return 2
    }

    let client = EchoClient(host: host, port: port)

    // Standard input, read when the main run loop says it is readable.
    let stdinWatcher = try? RLFileDescriptorSource(fileDescriptor: 0) { watcher, _ in
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(0, &buffer, buffer.count)
        if n > 0 {
            client.takeInput(Array(buffer.prefix(n)))
            watcher.enableCallBacks(.read)
        } else if n < 0 && errno == EINTR {
            watcher.enableCallBacks(.read)
        } else {
            client.inputEnded()
        }
    }
    if let stdinWatcher {
        stdinWatcher.enableCallBacks(.read)
        RLRunLoop.main.add(stdinWatcher, forMode: .default)
    } else {
        client.inputEnded() // no usable standard input: send nothing
    }

    // The signals, as an async sequence: the main run loop reads them, this
    // task (on Swift's thread pool) decides what to do.
    let interrupted = RLAtomicInt32(0)
    let signalTask = Task.detached {
        for await delivery in signals {
            interrupted.store(delivery.signal)
            RLRunLoop.main.stop()
            break
        }
    }

    RLRunLoop.main.run()

    let signal = interrupted.load()
    if signal != 0 {
        say("\(signal == SIGINT ? "SIGINT" : "SIGTERM"): closing the connection")
        client.finish()
    }
    signalTask.cancel()
    signals.cancel()
    stdinWatcher?.invalidate()
    server?.stop()
    say("bye")
    return client.failed ? 1 : 0
}

exit(main())
