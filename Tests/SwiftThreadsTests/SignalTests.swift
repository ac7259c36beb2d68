import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// RLSignalSource and the RLSignals async sequence.
//
// In this test process only the main thread leaves signals unblocked (the
// Swift concurrency pool's threads block them all, and the test threads
// inherit that), and the main thread is not ours to block: a signal sent
// to the whole process (kill) would be taken by the main thread. So the
// in-process tests direct the signal at the thread whose run loop watches
// it — raise() on that thread, or pthread_kill from another — and the
// process-wide kill() is tested on the echo client example, which watches
// its signals from the start of main.

/// The handler currently installed for `signal` is the default one.
func hasDefaultDisposition(_ signal: Int32) -> Bool {
    var action = sigaction()
    precondition(sigaction(signal, nil, &action) == 0)
    return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) == 0
}

let realtimeSignal = __libc_current_sigrtmin() + 5

@Suite(.serialized) struct SignalTests {
    @Test func raiseRunsTheClosureOnTheLoopThread() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let log = LoopEventLog<String>()
            let source = try! RLSignalSource(signal: SIGUSR1) { source, delivery in
                log.append("\(delivery.signal == SIGUSR1 ? "SIGUSR1" : "?") x\(delivery.count)"
                           + (RLRunLoop.current == loop ? " on the loop thread" : " elsewhere")
                           + (source.signal == SIGUSR1 ? "" : " wrong source"))
                RLRunLoop.current.stop()
            }
            #expect(source.signal == SIGUSR1)
            #expect(!hasDefaultDisposition(SIGUSR1))
            #expect(loop.add(source, forMode: .default))
            #expect(loop.contains(source, forMode: .default))
            raise(SIGUSR1)
            _ = try? loop.run(mode: .default, for: 30)
            // A standard signal raised three times before the loop runs is
            // pending once: one delivery, count 1.
            raise(SIGUSR1)
            raise(SIGUSR1)
            raise(SIGUSR1)
            _ = try? loop.run(mode: .default, for: 30)
            // Realtime signals queue: three raised, one delivery of 3.
            let realtime = try! RLSignalSource(signal: realtimeSignal) { _, delivery in
                log.append("realtime x\(delivery.count)")
                RLRunLoop.current.stop()
            }
            loop.add(realtime, forMode: .default)
            for _ in 0..<3 { raise(realtimeSignal) }
            _ = try? loop.run(mode: .default, for: 30)
            #expect(source.invalidate())
            #expect(realtime.invalidate())
            #expect(hasDefaultDisposition(SIGUSR1))
            #expect(hasDefaultDisposition(realtimeSignal))
            return log.values
        }
        #expect(log == ["SIGUSR1 x1 on the loop thread", "SIGUSR1 x1 on the loop thread", "realtime x3"])
    }

    @Test func aSignalFromAnotherThreadAndTwoWatchers() {
        let (thread, loop) = startLoopThread()
        let counts = LoopEventLog<String>()
        let first = try! RLSignalSource(signal: SIGUSR2) { _, delivery in counts.append("first \(delivery.count)") }
        let second = try! RLSignalSource(signal: SIGUSR2) { _, delivery in counts.append("second \(delivery.count)") }
        loop.add(first, forMode: .default)
        loop.add(second, forMode: .common)
        // The loop thread's pthread id, then a signal aimed at it.
        let target = LoopSlot<pthread_t>()
        loop.perform { target.set(pthread_self()) }
        loop.wakeUp()
        #expect(loopEventually { target.value != nil })
        #expect(pthread_kill(target.value!, SIGUSR2) == 0)
        #expect(loopEventually { counts.count == 2 })
        #expect(Set(counts.values) == ["first 1", "second 1"])
        first.invalidate()
        #expect(!hasDefaultDisposition(SIGUSR2)) // the second still watches
        second.invalidate()
        #expect(hasDefaultDisposition(SIGUSR2))
        loop.stop()
        thread.join()
    }

    @Test func signalsAsAnAsyncSequence() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let signals = try RLSignals(SIGUSR1, SIGUSR2, SIGUSR1, runLoop: loop)
        #expect(!hasDefaultDisposition(SIGUSR1) && !hasDefaultDisposition(SIGUSR2))
        // A second watcher on the loop counts the deliveries as they happen.
        let seen = RLAtomicInt32(0)
        let counter = try RLSignalSource(signal: SIGUSR2) { _, delivery in seen.add(Int32(delivery.count)) }
        loop.add(counter, forMode: .default)
        defer { counter.invalidate() }

        var iterator = signals.makeAsyncIterator()
        loop.perform { raise(SIGUSR1) }
        loop.wakeUp()
        #expect(await iterator.next() == RLSignal(signal: SIGUSR1, count: 1))
        // Two deliveries of SIGUSR2 in two passes of the loop, not taken
        // yet: the sequence merges them into one element of count 2.
        for expected in Int32(1)...2 {
            loop.perform { raise(SIGUSR2) }
            loop.wakeUp()
            #expect(await asyncEventually { seen.load() == expected })
        }
        #expect(await iterator.next() == RLSignal(signal: SIGUSR2, count: 2))
        // Ending it invalidates its sources: the default disposition is back.
        signals.cancel()
        #expect(await iterator.next() == nil)
        #expect(hasDefaultDisposition(SIGUSR1))
        #expect(!hasDefaultDisposition(SIGUSR2)) // the counter still watches
        // One iteration only.
        var again = signals.makeAsyncIterator()
        #expect(await again.next() == nil)
    }

    @Test func cancellingTheTaskEndsTheSequence() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        let signals = try RLSignals([SIGUSR1], runLoop: loop)
        let started = RLAtomicInt32(0)
        let task = Task { () -> Int in
            started.store(1)
            var count = 0
            for await _ in signals { count += 1 }
            return count
        }
        #expect(await asyncEventually { started.load() == 1 })
        task.cancel()
        #expect(await task.value == 0)
        #expect(hasDefaultDisposition(SIGUSR1))
    }

    @Test func leavingTheLoopEndsTheSequence() async throws {
        let (thread, loop) = startLoopThread()
        defer {
            loop.stop()
            thread.join()
        }
        do {
            let signals = try RLSignals(SIGUSR2, runLoop: loop)
            loop.perform { raise(SIGUSR2) }
            loop.wakeUp()
            for await delivery in signals {
                #expect(delivery == RLSignal(signal: SIGUSR2, count: 1))
                break
            }
            #expect(hasDefaultDisposition(SIGUSR2))
        }
        // Iterated without being kept: the iteration keeps it going.
        let target = LoopSlot<pthread_t>()
        loop.perform { target.set(pthread_self()) }
        loop.wakeUp()
        #expect(loopEventually { target.value != nil })
        let loopThread = target.value!
        // Sent until the iteration takes one (its source may not be in the
        // loop yet). A realtime signal, because each one sent is queued and
        // wakes the loop; a standard signal already pending on the loop's
        // thread before its source joined the loop from this thread does
        // not wake the loop, and later ones merge into it.
        let sender = Task {
            while !Task.isCancelled {
                pthread_kill(loopThread, realtimeSignal)
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        var deliveries: [RLSignal] = []
        for await delivery in try RLSignals(realtimeSignal, runLoop: loop) {
            deliveries.append(delivery)
            break
        }
        #expect(deliveries.map(\.signal) == [realtimeSignal])
        sender.cancel()
        _ = await sender.value
        #expect(hasDefaultDisposition(realtimeSignal))
        // Dropped without being iterated: its sources go too.
        do {
            _ = try RLSignals(SIGUSR1, runLoop: loop)
        }
        #expect(hasDefaultDisposition(SIGUSR1))
    }

    @Test func misuse() throws {
        for bad in [0, -1, SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, SIGFPE, SIGILL, 1000] as [Int32] {
            do {
                _ = try RLSignalSource(signal: bad) { _, _ in }
                Issue.record("signal \(bad) accepted")
            } catch {
                #expect(error.code == .invalidArgument)
            }
        }
        // A list with a signal that cannot be watched watches none of them.
        #expect(throws: RLError.self) { _ = try RLSignals(SIGUSR1, SIGKILL, runLoop: RLRunLoop.current) }
        #expect(hasDefaultDisposition(SIGUSR1))
        #expect(throws: RLError.self) { _ = try RLSignals([], runLoop: RLRunLoop.current) }
        // A mode that cannot hold the source.
        #expect(throws: RLError.self) { _ = try RLSignals(SIGUSR1, runLoop: RLRunLoop.current, mode: RLRunLoop.Mode("")) }
        #expect(hasDefaultDisposition(SIGUSR1))

        let source = try RLSignalSource(signal: SIGUSR1) { _, _ in }
        #expect(source.isValid)
        #expect(source.makeRunLoopSource() != nil)
        #expect(source.invalidate())
        #expect(source.invalidate())
        #expect(!source.isValid)
        #expect(source.makeRunLoopSource() == nil)
        #expect(!RLRunLoop.current.add(source, forMode: .default))
        #expect(!RLRunLoop.current.contains(source, forMode: .default))
        #expect(hasDefaultDisposition(SIGUSR1))
    }

    @Test func invalidatingInsideTheClosureFreesIt() {
        let (freed, calls) = onFreshLoopThread { () -> (Bool, Int) in
            weak var weakCanary: LeakCanary?
            let calls = RLAtomicInt32(0)
            do {
                let canary = LeakCanary()
                weakCanary = canary
                let source = try! RLSignalSource(signal: SIGUSR2) { source, _ in
                    canary.touch()
                    calls.add(1)
                    source.invalidate()
                    RLRunLoop.current.stop()
                }
                RLRunLoop.current.add(source, forMode: .default)
                raise(SIGUSR2)
                _ = try? RLRunLoop.current.run(mode: .default, for: 30)
            }
            return (weakCanary == nil, Int(calls.load()))
        }
        #expect(freed)
        #expect(calls == 1)
        #expect(hasDefaultDisposition(SIGUSR2))
    }
}

// MARK: - The echo client example: a signal sent to the whole process

/// The example's executable, next to the test bundle in the build folder.
private func exampleExecutable(_ name: String) -> String? {
    var path = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &path, path.count - 1)
    guard n > 0 else { return nil }
    var directory = String(decoding: path.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    // …/debug/CRunLoopPackageTests.xctest (a file on Linux).
    while let slash = directory.lastIndex(of: "/") {
        directory = String(directory[..<slash])
        let candidate = directory + "/" + name
        if access(candidate, X_OK) == 0 { return candidate }
        if directory.hasSuffix("/.build") || directory.isEmpty { break }
    }
    return nil
}

/// A child process with pipes to its standard input and output.
private final class Child {
    let pid: pid_t
    /// Our ends of the pipes, -1 once closed (closing a number twice could
    /// close a descriptor that a parallel test opened meanwhile).
    private(set) var stdinWrite: Int32
    private var stdoutRead: Int32
    private(set) var output = ""

    init?(_ path: String, _ arguments: [String] = []) {
        var toChild: [Int32] = [-1, -1]
        var fromChild: [Int32] = [-1, -1]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { return nil }
        // Not inherited by anything else this process starts.
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 2)
        for fd in toChild + fromChild { posix_spawn_file_actions_addclose(&actions, fd) }
        // The child starts with no signal blocked, whatever this thread blocks.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, path, &actions, &attributes, argv, environ)
        close(toChild[0])
        close(fromChild[1])
        guard rc == 0 else {
            close(toChild[1])
            close(fromChild[0])
            return nil
        }
        pid = child
        stdinWrite = toChild[1]
        stdoutRead = fromChild[0]
    }

    /// Sends `text` to the child's standard input.
    func send(_ text: String) {
        var bytes = Array(text.utf8)
        precondition(write(stdinWrite, &bytes, bytes.count) == bytes.count)
    }

    /// Closes the child's standard input (it reads its end).
    func closeStdin() {
        if stdinWrite >= 0 { close(stdinWrite) }
        stdinWrite = -1
    }

    /// Reads the child's output until it contains `text` (false at its end).
    func readUntil(_ text: String) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !output.contains(text) {
            let n = read(stdoutRead, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            output += String(decoding: buffer.prefix(n), as: UTF8.self)
        }
        return true
    }

    /// Waits for the child to exit: its exit status, or -signal if killed.
    func wait() -> Int32 {
        _ = readUntil("\u{0}never")
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        close(stdoutRead)
        stdoutRead = -1
        closeStdin()
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : -signal
    }
}

@Suite struct EchoClientExampleTests {
    private static let name = "swiftthreads-echo-client"

    @Test func echoesLinesAndEndsWithItsInput() throws {
        let path = try #require(exampleExecutable(Self.name), "build \(Self.name) (swift build builds it)")
        let child = try #require(Child(path))
        child.send("hello\nrun loop\n")
        child.closeStdin()
        #expect(child.wait() == 0)
        for line in ["listening on", "connected to 127.0.0.1:", "echo: hello", "echo: run loop",
                     "the server closed the connection", "bye"] {
            #expect(child.output.contains(line), "missing \(line) in:\n\(child.output)")
        }
    }

    @Test func sigtermSentToTheProcessArrivesThroughRLSignals() throws {
        let path = try #require(exampleExecutable(Self.name), "build \(Self.name) (swift build builds it)")
        let child = try #require(Child(path))
        // Connected, and an echo back: the loop runs and the signals are watched.
        child.send("ping\n")
        #expect(child.readUntil("echo: ping"))
        #expect(kill(child.pid, SIGTERM) == 0)
        // It exits cleanly: the signal did not kill it.
        #expect(child.wait() == 0)
        #expect(child.output.contains("SIGTERM: closing the connection"), "output:\n\(child.output)")
        #expect(child.output.hasSuffix("bye\n"), "output:\n\(child.output)")
    }
}
