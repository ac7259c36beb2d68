import Testing
@testable import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Struck when a scenario hangs (the bound only keeps a failure from
/// hanging the run).
private struct TimedOut: Error {}

/// Runs `body`, failing with `TimedOut` if it takes more than `seconds`.
private func within<T: Sendable>(_ seconds: Int = 60,
                                 _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw TimedOut() }
        return value
    }
}

/// Polls `condition` (every 5 ms, at most 30 s).
private func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<6000 {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}

/// Reads `connection` to its end.
private func readAll(_ connection: RLAsyncConnection) async throws -> [UInt8] {
    var all: [UInt8] = []
    for try await chunk in connection.inbound { all += chunk }
    return all
}

/// Echoes every connection of `server`, each in a task of its own, until
/// the server closes.
private func echo(_ server: RLAsyncServer) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        for try await connection in server {
            group.addTask {
                for try await chunk in connection.inbound { try await connection.write(chunk) }
                connection.shutdownWrite()
            }
        }
        try await group.waitForAll()
    }
}

/// The next connection of `server` (a failure if it ends first).
private func accept(_ server: RLAsyncServer) async throws -> RLAsyncConnection {
    let connection = try await within {
        var iterator = server.makeAsyncIterator()
        return try await iterator.next()
    }
    return try #require(connection)
}

/// `count` bytes of a pattern that shows misplaced or lost bytes.
private func pattern(_ count: Int, seed: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed &+ $0 / 251) }
}

/// A plain blocking TCP socket connected to `port` on 127.0.0.1.
private func rawConnect(_ port: UInt16) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var sin = sockaddr_in()
    sin.sin_family = sa_family_t(AF_INET)
    sin.sin_port = port.bigEndian
    sin.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    let r = withUnsafePointer(to: &sin) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    precondition(r == 0, "connect: errno \(errno)")
    return fd
}

@Suite("Async server and connections")
struct AsyncServerTests {
    @Test("many connections at once are echoed byte for byte")
    func echoOfManyConnections() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let serving = Task { try await echo(server) }
        let results = try await within {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for client in 0..<24 {
                    group.addTask {
                        let connection = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
                        let sent = pattern(50_000 + client * 1_000, seed: client)
                        async let received = readAll(connection)
                        var offset = 0
                        while offset < sent.count {
                            let end = min(offset + 7_000, sent.count)
                            try await connection.write(sent[offset..<end])
                            offset = end
                        }
                        connection.shutdownWrite()
                        return try await received == sent
                    }
                }
                var results: [Bool] = []
                for try await ok in group { results.append(ok) }
                return results
            }
        }
        #expect(results.count == 24)
        #expect(results.allSatisfy { $0 })
        server.close()
        try await within { try await serving.value }
        #expect(!server.isOpen)
    }

    @Test("a peer that does not read suspends the writer, which resumes once the peer reads")
    func backpressure() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0), highWatermark: 16 * 1024,
                                       lowWatermark: 4 * 1024)
        let port = try #require(server.address?.port)
        // The client reads at most ~1 KiB ahead, then stops reading its
        // socket: the kernel's buffers fill, then the server's queue.
        let client = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port), highWatermark: 1024,
                                                        lowWatermark: 0)
        let connection = try await accept(server)
        let stop = ThreadsMutexProtected(false)
        let writes = ThreadsMutexProtected(0)
        let chunk = pattern(64 * 1024, seed: 7)
        let writer = Task {
            while !stop.withLock({ $0 }) {
                try await connection.write(chunk)
                writes.withLock { $0 += 1 }
            }
            connection.shutdownWrite()
            return writes.withLock { $0 }
        }
        // The writer gets ahead of the peer and is held back.
        #expect(await eventually { !connection.isWritable })
        #expect(connection.queuedByteCount > 16 * 1024)
        let held = writes.withLock { $0 }
        try await Task.sleep(for: .milliseconds(200))
        #expect(writes.withLock { $0 } == held, "a write returned while the connection was not writable")
        #expect(!connection.isWritable)
        // The client read ahead no further than its own high watermark
        // (plus one read).
        #expect(client.inbound.bufferedByteCount <= 1024 + 64 * 1024)
        // The peer reads: the writer goes on, and every byte arrives.
        stop.withLock { $0 = true }
        let received = try await within { try await readAll(client) }
        let total = try await within { try await writer.value }
        #expect(total > held)
        #expect(received.count == total * chunk.count)
        #expect(received.elementsEqual((0..<total).lazy.flatMap { _ in chunk }))
        server.close()
    }

    @Test("cancelling the accept loop's task closes the server")
    func cancellingTheAcceptLoopClosesTheServer() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let loop = Task { () -> Int in
            var count = 0
            for try await _ in server { count += 1 }
            return count
        }
        // One connection goes through, then the task is cancelled.
        let first = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
        #expect(await eventually { first.isOpen })
        try await Task.sleep(for: .milliseconds(50))
        loop.cancel()
        let count = try await within { try await loop.value }
        #expect(count <= 1)
        #expect(!server.isOpen)
        #expect(server.address == nil)
        // Nobody listens any more.
        await #expect {
            _ = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
        } throws: { error in
            (error as? RLError)?.systemErrno == ECONNREFUSED
        }
    }

    @Test("cancelling a connection's task closes it: its peer reads the end")
    func cancellingAConnectionsTaskClosesIt() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let client = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
        let connection = try await accept(server)
        // A reader waiting for bytes that never come, cancelled.
        let reader = Task { try await readAll(connection) }
        try await Task.sleep(for: .milliseconds(50))
        reader.cancel()
        _ = try await within { try await reader.value }
        #expect(!connection.isOpen)
        // The peer sees the close as the end of its stream.
        #expect(try await within { try await readAll(client) } == [])
        // A write on the closed connection fails.
        await #expect(throws: RLError.self) { try await connection.write([1, 2, 3]) }
        server.close()
    }

    @Test("cancelling a suspended write throws CancellationError and closes the connection")
    func cancellingASuspendedWrite() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0), highWatermark: 1024, lowWatermark: 0)
        let port = try #require(server.address?.port)
        let client = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port), highWatermark: 1024,
                                                        lowWatermark: 0)
        let connection = try await accept(server)
        let writer = Task { () -> (any Error)? in
            let chunk = [UInt8](repeating: 0x5a, count: 64 * 1024)
            do {
                while true { try await connection.write(chunk) }
            } catch {
                return error
            }
        }
        #expect(await eventually { !connection.isWritable })
        writer.cancel()
        let error = try await within { await writer.value }
        #expect(error is CancellationError)
        #expect(!connection.isOpen)
        // The client drains what had arrived, then reads the end.
        _ = try await within { try await readAll(client) }
        server.close()
    }

    @Test("the peer's close ends the read sequence; half-close keeps the other direction")
    func peerCloseEndsTheReadSequence() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let client = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
        let connection = try await accept(server)
        try await client.write("question")
        client.shutdownWrite()
        // The server reads everything, then the end...
        let question = try await within { try await readAll(connection) }
        #expect(question == Array("question".utf8))
        // ...and can still answer on the half-closed connection.
        try await connection.write("answer")
        connection.shutdownWrite()
        let answer = try await within { try await readAll(client) }
        #expect(answer == Array("answer".utf8))
        // Both directions ended: both ends released their sockets.
        #expect(await eventually { !connection.isOpen && !client.isOpen })
        // Writing after the shutdown is refused.
        await #expect {
            try await client.write("late")
        } throws: { error in
            let code = (error as? RLError)?.code
            return code == .invalidState || code == .invalidObject
        }
        server.close()
    }

    @Test("a reset connection throws ECONNRESET from the read sequence, then a write fails")
    func errorsSurfaceAsThrownErrors() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let fd = rawConnect(port)
        let connection = try await accept(server)
        // Close with SO_LINGER 0: the peer gets a reset.
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        #expect(setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size)) == 0)
        close(fd)
        await #expect {
            _ = try await within { try await readAll(connection) }
        } throws: { error in
            (error as? RLError)?.systemErrno == ECONNRESET
        }
        // The read error is thrown once; the sequence then ends.
        #expect(try await within { try await readAll(connection) } == [])
        await #expect {
            try await connection.write([UInt8](repeating: 1, count: 100_000))
        } throws: { error in
            let e = error as? RLError
            return e?.code == .system && (e?.systemErrno == EPIPE || e?.systemErrno == ECONNRESET)
        }
        server.close()
    }

    @Test("misuse: bad watermarks, an address in use, a refused connect, two readers, a closed server")
    func misuse() async throws {
        #expect(throws: RLError.self) { try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0), highWatermark: 0) }
        #expect {
            try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0), highWatermark: 10, lowWatermark: 11)
        } throws: { ($0 as? RLError)?.code == .invalidArgument }
        await #expect {
            _ = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: 1), highWatermark: 1, lowWatermark: -1)
        } throws: { ($0 as? RLError)?.code == .invalidArgument }

        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        // SO_REUSEADDR does not let a second listener take a listening port.
        #expect {
            try RLAsyncServer(listeningOn: .ipv4(loopbackPort: port))
        } throws: { ($0 as? RLError)?.systemErrno == EADDRINUSE }

        // A second task waiting on the same server is refused.
        let waiting = Task { () -> RLAsyncConnection? in
            var iterator = server.makeAsyncIterator()
            return try await iterator.next()
        }
        try await Task.sleep(for: .milliseconds(50))
        await #expect {
            var iterator = server.makeAsyncIterator()
            _ = try await iterator.next()
        } throws: { ($0 as? RLError)?.code == .invalidState }

        // Closing the server ends the waiting sequence with nil.
        server.close()
        server.close()
        #expect(try await within { try await waiting.value } == nil)
        var after = server.makeAsyncIterator()
        #expect(try await after.next() == nil)

        // Nothing listens on the port now.
        await #expect {
            _ = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
        } throws: { error in
            let e = error as? RLError
            return e?.code == .system && e?.systemErrno == ECONNREFUSED
        }
    }

    @Test("two tasks reading one connection: the second is refused")
    func twoReaders() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let client = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
        let reader = Task { try await readAll(client) }
        try await Task.sleep(for: .milliseconds(50))
        await #expect {
            var iterator = client.inbound.makeAsyncIterator()
            _ = try await iterator.next()
        } throws: { ($0 as? RLError)?.code == .invalidState }
        client.close()
        client.close()
        #expect(try await within { try await reader.value } == [])
        server.close()
    }

    @Test("past maxQueuedConnections untaken, accepting pauses and then resumes: no connection is lost")
    func acceptingPausesAndResumes() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let count = RLAsyncServer.maxQueuedConnections + 16
        // The kernel completes these connects (backlog 256) whether the
        // server accepts them or not.
        let fds = (0..<count).map { _ in rawConnect(port) }
        defer { for fd in fds { close(fd) } }
        let taken = try await within {
            var iterator = server.makeAsyncIterator()
            var taken = 0
            while taken < count, try await iterator.next() != nil { taken += 1 }
            return taken
        }
        #expect(taken == count)
        server.close()
    }

    @Test("dropping the last reference to a connection closes it")
    func droppingAConnectionClosesIt() async throws {
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0))
        let port = try #require(server.address?.port)
        let client = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port))
        do {
            let connection = try await accept(server)
            try await connection.write("bye")
        }
        // The server's end is gone: the client reads what was sent, then the end.
        #expect(try await within { try await readAll(client) } == Array("bye".utf8))
        server.close()
    }

    @Test("an echo that half-closes and drops its connection with bytes still queued loses none of them (late reader)")
    func droppedAfterShutdownWriteSendsTheTail() async throws {
        // The server's echo task ends right after shutdownWrite(), which
        // drops its connection while the echo's tail still waits unsent
        // (the client has not read yet): that tail must still go out
        // before the end of the stream.
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0), highWatermark: 8 * 1024 * 1024,
                                       lowWatermark: 16 * 1024)
        let port = try #require(server.address?.port)
        let serving = Task { try await echo(server) }
        let block = (0..<(64 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 8) }
        let count = 128
        for iteration in 0..<30 {
            let echoed = try await within {
                let client = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port),
                                                                 highWatermark: 16 * 1024, lowWatermark: 4 * 1024)
                for index in 0..<count {
                    var chunk = block
                    chunk[0] = UInt8(truncatingIfNeeded: index)
                    try await client.write(chunk)
                }
                client.shutdownWrite()
                // Reads late: once the server has read everything, so its
                // echo task has ended with the tail still queued.
                _ = await eventually { client.queuedByteCount == 0 }
                try await Task.sleep(for: .milliseconds(50))
                return try await readAll(client)
            }
            #expect(echoed.count == count * block.count, "iteration \(iteration)")
            guard echoed.count == count * block.count else { break }
            let mismatched = (0..<count).first { index in
                var chunk = block
                chunk[0] = UInt8(truncatingIfNeeded: index)
                return echoed.withUnsafeBytes { all in
                    chunk.withUnsafeBytes { memcmp(all.baseAddress! + index * block.count, $0.baseAddress!, $0.count) != 0 }
                }
            }
            #expect(mismatched == nil, "iteration \(iteration)")
        }
        server.close()
        try await serving.value
    }

    @Test("a Unix-domain server echoes too")
    func unixDomain() async throws {
        let directory = makeTempDirectory("async-unix")
        let path = directory + "/echo.sock"
        defer {
            removeFile(path)
            removeDirectory(directory)
        }
        let address = try #require(RLSocket.Address(unixPath: path))
        let server = try RLAsyncServer(listeningOn: address)
        #expect(server.address?.host == path)
        let serving = Task { try await echo(server) }
        let client = try await RLAsyncConnection.connect(to: address)
        let sent = pattern(200_000, seed: 3)
        let reading = Task { try await readAll(client) }
        try await client.write(sent)
        client.shutdownWrite()
        #expect(try await within { try await reading.value } == sent)
        server.close()
        try await within { try await serving.value }
    }

    @Test("a server on a given run loop serves its connections there")
    func onAGivenRunLoop() async throws {
        let worker = RLWorkerThread(name: "given")
        try worker.start()
        defer { stopInDefer(worker) }
        let loop = try #require(worker.runLoop)
        let server = try RLAsyncServer(listeningOn: .ipv4(loopbackPort: 0), runLoop: loop)
        let port = try #require(server.address?.port)
        let serving = Task { try await echo(server) }
        let client = try await RLAsyncConnection.connect(to: .ipv4(loopbackPort: port), runLoop: loop)
        try await client.write("over the given loop")
        client.shutdownWrite()
        #expect(try await within { try await readAll(client) } == Array("over the given loop".utf8))
        server.close()
        try await within { try await serving.value }
    }
}

@Suite("Port message sequences are bounded")
struct PortMessagesBoundTests {
    /// A port on a worker thread's loop whose messages sequence is made
    /// before anything is sent, and not read until everything was sent.
    @Test("the default sequence keeps the first 1024 untaken messages and counts the rest as dropped")
    func defaultBound() async throws {
        #expect(RLPort.defaultMessagesBufferLimit == 1024)
        let worker = RLWorkerThread(name: "ports")
        try worker.start()
        defer { stopInDefer(worker) }
        let loop = try #require(worker.runLoop)
        let port = RLPort()
        defer { port.invalidate() }
        let messages = port.messages
        loop.add(port, forMode: .default)
        for id in 0..<1100 { try port.send(msgid: UInt32(id), timeout: .seconds(30)) }
        // The loop thread hands all of them on; 76 do not fit.
        #expect(await eventually { port.queuedCount == 0 && port.droppedMessageCount == 76 })
        var iterator = messages.makeAsyncIterator()
        var ids: [UInt32] = []
        for _ in 0..<1024 { if let message = await iterator.next() { ids.append(message.msgid) } }
        #expect(ids == (0..<1024).map { UInt32($0) })
        // Room again: the next message arrives, and nothing more was dropped.
        try port.send(msgid: 5000, timeout: .seconds(30))
        #expect(await iterator.next()?.msgid == 5000)
        #expect(port.droppedMessageCount == 76)
    }

    @Test("bufferingNewest keeps the last messages; unbounded drops nothing")
    func otherPolicies() async throws {
        let worker = RLWorkerThread(name: "ports")
        try worker.start()
        defer { stopInDefer(worker) }
        let loop = try #require(worker.runLoop)

        let newest = RLPort()
        defer { newest.invalidate() }
        let kept = newest.messages(bufferingPolicy: .bufferingNewest(3))
        loop.add(newest, forMode: .default)
        for id in 0..<10 { try newest.send(msgid: UInt32(id), timeout: .seconds(30)) }
        #expect(await eventually { newest.queuedCount == 0 && newest.droppedMessageCount == 7 })
        var iterator = kept.makeAsyncIterator()
        var ids: [UInt32] = []
        for _ in 0..<3 { if let message = await iterator.next() { ids.append(message.msgid) } }
        #expect(ids == [7, 8, 9])

        let unbounded = RLPort()
        defer { unbounded.invalidate() }
        let all = unbounded.messages(bufferingPolicy: .unbounded)
        loop.add(unbounded, forMode: .default)
        for id in 0..<1500 { try unbounded.send(msgid: UInt32(id), timeout: .seconds(30)) }
        #expect(await eventually { unbounded.queuedCount == 0 })
        var count = 0
        for await message in all {
            #expect(message.msgid == UInt32(count))
            count += 1
            if count == 1500 { unbounded.invalidate() }
        }
        #expect(count == 1500)
        #expect(unbounded.droppedMessageCount == 0)
    }

    @Test("a socket port's sequence is bounded the same way")
    func socketPortBound() async throws {
        let port = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        let messages = port.messages(bufferingPolicy: .bufferingOldest(5))
        let server = SocketServer(port)
        defer { server.stop() }
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: port.tcpPort)
        for id: UInt32 in 0..<12 { try remote.send([.bytes([UInt8(id)])], msgid: id, before: RLTime.now + 10) }
        #expect(await eventually { port.droppedMessageCount == 7 })
        var iterator = messages.makeAsyncIterator()
        var ids: [UInt32] = []
        for _ in 0..<5 { if let message = await iterator.next() { ids.append(message.msgid) } }
        #expect(ids == [0, 1, 2, 3, 4])
        #expect(port.droppedMessageCount == 7)
    }
}
