import Testing
import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// RLSocket: CFSocket's callbacks (accept, data, connect, read, write) over
// loopback and socket pairs, flags, addresses, invalidation and misuse.

/// A connected pair of Unix stream sockets (closed by whoever owns them).
func testSocketPair(_ type: Int32 = Int32(SOCK_STREAM.rawValue)) -> (Int32, Int32) {
    var fds: [Int32] = [-1, -1]
    precondition(socketpair(AF_UNIX, type, 0, &fds) == 0)
    return (fds[0], fds[1])
}

/// Writes all of `bytes` to `fd` (a test's own end of a socket pair).
func testWrite(_ fd: Int32, _ bytes: [UInt8]) {
    precondition(bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count)
}

/// A loopback port nobody listens on (bound, then released: the kernel
/// does not hand a just-released ephemeral port out again at once).
func unusedLoopbackPort() -> UInt16 {
    let probe = try! RLSocket(callBackTypes: .read)
    try! probe.setAddress(.ipv4(loopbackPort: 0))
    let port = probe.address!.port!
    probe.invalidate()
    return port
}

/// An echo server on its own run-loop thread: every connection echoes what
/// it receives and closes when its peer does.
final class TestEchoServer: @unchecked Sendable {
    let thread: RunLoopTestThread
    let loop: RLRunLoop
    let server: RLSocket
    let port: UInt16
    private let connections = LoopEventLog<RLSocket>()

    init() {
        (thread, loop) = startLoopThread()
        let connections = connections
        server = try! RLSocket(callBackTypes: .accept) { _, event in
            guard case .accept(let fd, _) = event else { return }
            let connection = try? RLSocket(nativeHandle: fd, callBackTypes: .data) { connection, event in
                guard case .data(let bytes, _) = event else { return }
                if bytes.isEmpty || (try? connection.send(bytes)) == nil { connection.invalidate() }
            }
            guard let connection else {
                close(fd)
                return
            }
            connections.append(connection)
            RLRunLoop.current.add(connection, forMode: .default)
        }
        try! server.setAddress(.ipv4(loopbackPort: 0))
        port = server.address!.port!
        loop.add(server, forMode: .default)
    }

    func stop() {
        server.invalidate()
        for connection in connections.values { connection.invalidate() }
        loop.stop()
        thread.join()
    }
}

@Suite struct SocketTests {
    @Test func acceptDataAndBackgroundConnectOverLoopback() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let log = LoopEventLog<String>()
            let connections = LoopEventLog<RLSocket>()
            let server = try! RLSocket(callBackTypes: .accept) { _, event in
                guard case .accept(let fd, let peer) = event else { return }
                log.append("accept from \(peer?.host ?? "?")")
                let connection = try! RLSocket(nativeHandle: fd, callBackTypes: .data) { connection, event in
                    guard case .data(let bytes, let from) = event else { return }
                    if bytes.isEmpty {
                        log.append("server saw the end")
                        connection.invalidate()
                        RLRunLoop.current.stop()
                        return
                    }
                    log.append("server got \(String(decoding: bytes, as: UTF8.self)) from \(from?.host ?? "?")")
                    try! connection.send(bytes)
                }
                connections.append(connection)
                RLRunLoop.current.add(connection, forMode: .default)
            }
            #expect(server.flags == [.automaticallyReenableAcceptCallBack, .closeOnInvalidate])
            try! server.setAddress(.ipv4(loopbackPort: 0))
            #expect(loop.add(server, forMode: .default))
            #expect(loop.contains(server, forMode: .default))
            let port = server.address!.port!
            #expect(port != 0)
            let client = try! RLSocket(callBackTypes: [.data, .connect]) { client, event in
                switch event {
                case .connect(let error):
                    log.append("connected: \(error.map { "errno \($0)" } ?? "ok")")
                    try! client.send(bytes: Array("hello".utf8))
                case .data(let bytes, _):
                    log.append("client got \(String(decoding: bytes, as: UTF8.self))")
                    client.invalidate() // closes: the server reads the end
                default:
                    log.append("unexpected \(event.type.rawValue)")
                }
            }
            loop.add(client, forMode: .default)
            try! client.connect(to: .ipv4(loopbackPort: port), timeout: -1)
            _ = try? loop.run(mode: .default, for: 30)
            #expect(client.peerAddress == nil) // invalidated
            server.invalidate()
            for connection in connections.values { connection.invalidate() }
            return log.values
        }
        // The accept and the connect callback come in the same pass, in
        // either order; the rest in order.
        #expect(Set(log.prefix(2)) == ["accept from 127.0.0.1", "connected: ok"])
        #expect(Array(log.dropFirst(2)) == ["server got hello from 127.0.0.1", "client got hello", "server saw the end"])
    }

    @Test func connectToAPortNobodyListensOn() throws {
        let port = unusedLoopbackPort()
        // Waiting connect: the error is thrown.
        let waiting = try RLSocket(callBackTypes: .read)
        defer { waiting.invalidate() }
        do {
            try waiting.connect(to: .ipv4(loopbackPort: port), timeout: 10)
            Issue.record("connect to an unused port succeeded")
        } catch {
            #expect(error.systemErrno == ECONNREFUSED)
        }
        // Background connect: the Connect callback carries the errno.
        let result = onFreshLoopThread { () -> [Int32?] in
            let log = LoopEventLog<Int32?>()
            let socket = try! RLSocket(callBackTypes: [.read, .connect]) { _, event in
                if case .connect(let error) = event { log.append(error) }
                RLRunLoop.current.stop()
            }
            RLRunLoop.current.add(socket, forMode: .default)
            try! socket.connect(to: .ipv4(loopbackPort: port), timeout: -1)
            _ = try? RLRunLoop.current.run(mode: .default, for: 30)
            socket.invalidate()
            return log.values
        }
        #expect(result == [ECONNREFUSED])
    }

    @Test func dataCallbackFollowsTheReenableFlag() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let (mine, theirs) = testSocketPair()
            defer { close(theirs) }
            let log = LoopEventLog<String>()
            let socket = try! RLSocket(nativeHandle: mine, callBackTypes: .data) { _, event in
                if case .data(let bytes, _) = event { log.append(String(decoding: bytes, as: UTF8.self)) }
            }
            #expect(socket.flags == [.automaticallyReenableDataCallBack, .closeOnInvalidate])
            // Data is not re-enabled after a delivery any more.
            try! socket.setFlags([.closeOnInvalidate])
            #expect(socket.flags == [.closeOnInvalidate])
            loop.add(socket, forMode: .default)
            testWrite(theirs, Array("a".utf8))
            _ = loop.runUntil { log.count == 1 }
            testWrite(theirs, Array("b".utf8))
            _ = try? loop.run(mode: .default, for: 0)
            _ = try? loop.run(mode: .default, for: 0)
            log.append("-")
            #expect(socket.enableCallBacks(.data))
            _ = loop.runUntil { log.count == 3 }
            // Disabled: nothing until enabled again, and nothing is lost.
            #expect(socket.disableCallBacks(.data))
            testWrite(theirs, Array("c".utf8))
            _ = try? loop.run(mode: .default, for: 0)
            log.append("-")
            socket.enableCallBacks(.data)
            _ = loop.runUntil { log.count == 5 }
            socket.invalidate()
            keep.invalidate()
            return log.values
        }
        #expect(log == ["a", "-", "b", "-", "c"])
    }

    @Test func readAndWriteCallbacks() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let keep = keepLoopAlive(loop)
            let (mine, theirs) = testSocketPair()
            defer { close(theirs) }
            let log = LoopEventLog<String>()
            let socket = try! RLSocket(nativeHandle: mine, callBackTypes: [.read, .write]) { socket, event in
                switch event {
                case .read:
                    var buffer = [UInt8](repeating: 0, count: 16)
                    let n = recv(socket.nativeHandle, &buffer, buffer.count, 0)
                    log.append(n > 0 ? "read \(String(decoding: buffer.prefix(n), as: UTF8.self))" : "read end")
                case .write:
                    log.append("write")
                default:
                    log.append("unexpected")
                }
            }
            loop.add(socket, forMode: .default)
            // Write is not re-enabled by default: one callback.
            _ = loop.runUntil { log.count == 1 }
            _ = try? loop.run(mode: .default, for: 0)
            testWrite(theirs, Array("x".utf8))
            _ = loop.runUntil { log.count == 2 }
            socket.enableCallBacks(.write)
            _ = loop.runUntil { log.count == 3 }
            // The peer closes: one last read callback.
            shutdown(theirs, Int32(SHUT_WR))
            _ = loop.runUntil { log.count == 4 }
            _ = try? loop.run(mode: .default, for: 0)
            socket.invalidate()
            keep.invalidate()
            return log.values
        }
        #expect(log == ["write", "read x", "write", "read end"])
    }

    @Test func datagramsCarryTheSendersAddress() {
        let log = onFreshLoopThread { () -> [String] in
            let loop = RLRunLoop.current
            let log = LoopEventLog<String>()
            let udp = Int32(SOCK_DGRAM.rawValue)
            let receiver = try! RLSocket(socketType: udp, callBackTypes: .data) { _, event in
                guard case .data(let bytes, let from) = event else { return }
                log.append("\(String(decoding: bytes, as: UTF8.self)) from \(from?.description ?? "?")")
                RLRunLoop.current.stop()
            }
            try! receiver.setAddress(.ipv4(loopbackPort: 0))
            let sender = try! RLSocket(socketType: udp, callBackTypes: .data)
            try! sender.setAddress(.ipv4(loopbackPort: 0))
            loop.add(receiver, forMode: .default)
            try! sender.send(bytes: Array("ping".utf8), to: receiver.address!, timeout: 5)
            _ = try? loop.run(mode: .default, for: 30)
            let expected = "ping from 127.0.0.1:\(sender.address!.port!)"
            receiver.invalidate()
            sender.invalidate()
            return log.values + [expected]
        }
        #expect(log.count == 2 && log[0] == log[1])
    }

    @Test func invalidateClosesFreesAndRemoves() throws {
        weak var weakCanary: LeakCanary?
        let (mine, theirs) = testSocketPair()
        defer { close(theirs) }
        let inode = inodeOf(mine)
        let socket: RLSocket
        do {
            let canary = LeakCanary()
            weakCanary = canary
            socket = try RLSocket(nativeHandle: mine, callBackTypes: .data) { _, _ in canary.touch() }
        }
        let loop = RLRunLoop.current
        #expect(loop.add(socket, forMode: testCustomMode))
        #expect(socket.isValid)
        #expect(socket.nativeHandle == mine)
        #expect(socket.invalidate())
        #expect(socket.invalidate())
        #expect(!socket.isValid)
        #expect(socket.nativeHandle == -1)
        #expect(!loop.contains(socket, forMode: testCustomMode))
        #expect(socket.makeRunLoopSource() == nil)
        #expect(inodeOf(mine) != inode)
        #expect(weakCanary == nil)
        #expect(socket.address == nil)
        #expect(!socket.enableCallBacks(.data))
        #expect(throws: RLError.self) { try socket.setAddress(.ipv4(loopbackPort: 0)) }
        #expect(throws: RLError.self) { try socket.send(bytes: [1]) }
    }

    @Test func withoutCloseOnInvalidateTheDescriptorStaysOpen() throws {
        let (mine, theirs) = testSocketPair()
        defer {
            close(mine)
            close(theirs)
        }
        let inode = inodeOf(mine)
        let socket = try RLSocket(nativeHandle: mine, callBackTypes: .read)
        try socket.setFlags(socket.flags.subtracting(.closeOnInvalidate))
        socket.invalidate()
        #expect(inodeOf(mine) == inode)
    }

    @Test func misuse() throws {
        #expect(throws: RLError.self) { _ = try RLSocket(nativeHandle: -1, callBackTypes: .read) }
        #expect(throws: RLError.self) { _ = try RLSocket(nativeHandle: 999_983, callBackTypes: .read) }
        // A pipe is not a socket.
        let pipe = TestPipe()
        defer { pipe.closeBoth() }
        #expect(throws: RLError.self) { _ = try RLSocket(nativeHandle: pipe.readEnd, callBackTypes: .read) }
        do {
            _ = try RLSocket(callBackTypes: RLSocket.CallBackTypes(rawValue: 16))
            Issue.record("unknown callback types accepted")
        } catch {
            #expect(error.code == .invalidArgument)
        }
        let socket = try RLSocket(callBackTypes: .data)
        defer { socket.invalidate() }
        // Types the socket was not made with, unknown flags.
        #expect(!socket.enableCallBacks(.write))
        #expect(RLError.last().code == .invalidArgument)
        #expect(!socket.disableCallBacks(.connect))
        let before = socket.flags
        do {
            try socket.setFlags(RLSocket.Flags(rawValue: 1 << 12))
            Issue.record("unknown flags accepted")
        } catch {
            #expect(error.code == .invalidArgument)
        }
        #expect(socket.flags == before)
        // A NaN timeout; bytes that are no socket address.
        #expect(throws: RLError.self) { try socket.connect(to: .ipv4(loopbackPort: 9), timeout: .nan) }
        #expect(throws: RLError.self) { try socket.setAddress(RLSocket.Address(bytes: [1])) }
        // Not connected: no peer, and sending fails.
        #expect(socket.peerAddress == nil)
        #expect(throws: RLError.self) { try socket.send(bytes: [1, 2, 3], timeout: 1) }
    }

    @Test func addresses() throws {
        let v4 = try #require(RLSocket.Address(ipv4: "127.0.0.1", port: 8080))
        #expect(v4.family == AF_INET)
        #expect(v4.host == "127.0.0.1")
        #expect(v4.port == 8080)
        #expect(v4.description == "127.0.0.1:8080")
        #expect(v4 == RLSocket.Address.ipv4(loopbackPort: 8080))
        #expect(v4 != RLSocket.Address.ipv4(loopbackPort: 8081))
        let v6 = try #require(RLSocket.Address(ipv6: "::1", port: 443))
        #expect(v6.family == AF_INET6)
        #expect(v6.description == "[::1]:443")
        let unix = try #require(RLSocket.Address(unixPath: "/tmp/echo.sock"))
        #expect(unix.family == AF_UNIX)
        #expect(unix.host == "/tmp/echo.sock")
        #expect(unix.port == nil)
        #expect(RLSocket.Address(ipv4: "localhost", port: 1) == nil)
        #expect(RLSocket.Address(ipv4: "::1", port: 1) == nil)
        #expect(RLSocket.Address(ipv6: "127.0.0.1", port: 1) == nil)
        #expect(RLSocket.Address(unixPath: "") == nil)
        #expect(RLSocket.Address(unixPath: String(repeating: "x", count: 200)) == nil)
        let junk = RLSocket.Address(bytes: [])
        #expect(junk.family == AF_UNSPEC)
        #expect(junk.port == nil && junk.host == nil)
        #expect(junk.description == "RLSocket.Address(0 bytes)")
    }

    @Test func unixDomainStreamSocket() throws {
        let path = "/tmp/swiftthreads-socket-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { unlink(path) }
        let address = try #require(RLSocket.Address(unixPath: path))
        let got = onFreshLoopThread { () -> String in
            let log = LoopEventLog<String>()
            let unixFamily = Int32(PF_UNIX)
            let server = try! RLSocket(protocolFamily: unixFamily, callBackTypes: .accept) { _, event in
                guard case .accept(let fd, _) = event else { return }
                var buffer = [UInt8](repeating: 0, count: 16)
                let n = recv(fd, &buffer, buffer.count, 0)
                log.append(String(decoding: buffer.prefix(max(n, 0)), as: UTF8.self))
                close(fd)
                RLRunLoop.current.stop()
            }
            try! server.setAddress(address)
            #expect(server.address?.host == path)
            RLRunLoop.current.add(server, forMode: .default)
            let client = try! RLSocket(protocolFamily: unixFamily, callBackTypes: .read)
            try! client.connect(to: address, timeout: 5)
            try! client.send(bytes: Array("unix".utf8))
            _ = try? RLRunLoop.current.run(mode: .default, for: 30)
            client.invalidate()
            server.invalidate()
            return log.values.first ?? ""
        }
        #expect(got == "unix")
    }
}
