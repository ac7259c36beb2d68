import Testing
@testable import SwiftThreads
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Socket ports (RLSocketPort, Foundation's SocketPort): TCP over loopback
// within the test process, receivers on fresh loop threads. Waits are
// bounded only to keep a broken build from hanging.

private let sockStream = Int32(SOCK_STREAM.rawValue)
private let tcpProto = Int32(IPPROTO_TCP)

/// The bytes of a sockaddr_in for `a.b.c.d:port`.
func sockaddrIn(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, port: UInt16) -> [UInt8] {
    var sin = sockaddr_in()
    sin.sin_family = sa_family_t(AF_INET)
    sin.sin_port = port.bigEndian
    withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: [a, b, c, d]) }
    return withUnsafeBytes(of: sin) { Array($0) }
}

/// The TCP port in a sockaddr_in / sockaddr_in6.
func sockaddrPort(_ bytes: [UInt8]) -> UInt16 {
    guard bytes.count >= 4 else { return 0 }
    return UInt16(bytes[2]) << 8 | UInt16(bytes[3])
}

/// A local socket port served by its own run-loop thread.
final class SocketServer: @unchecked Sendable {
    let port: RLSocketPort
    let thread: RunLoopTestThread
    let loop: RLRunLoop

    init(_ port: RLSocketPort) {
        self.port = port
        (thread, loop) = startLoopThreadWith { loop in
            precondition(loop.add(port, forMode: .default), "cannot add the socket port: \(RLError.last())")
        }
    }

    func stop() {
        loop.stop()
        thread.join()
        port.invalidate()
    }
}

/// What a receiver saw of one message.
struct SeenMessage: Sendable, Equatable {
    var msgid: UInt32
    var parts: [String]  // "data:<bytes count>:<first byte>" or "port:<tcp port>:<remote?>"
    var sendPortTCP: UInt16?
    var receivedOnSelf: Bool
}

func describeParts(_ components: [RLPortComponent]?) -> [String] {
    (components ?? []).map { part in
        switch part {
        case .data(let data): return "data:\(data.count):\(data.first ?? 0)"
        case .port(let port):
            guard let socket = port as? RLSocketPort else { return "port:local" }
            return "port:\(socket.tcpPort):\(socket.isRemote ? "remote" : "local")"
        }
    }
}

final class RecordingDelegate: RLPortDelegate, @unchecked Sendable {
    let seen = LoopEventLog<SeenMessage>()
    weak var owner: RLPort?
    func handle(_ message: RLPortMessage) {
        seen.append(SeenMessage(msgid: message.msgid, parts: describeParts(message.components),
                                sendPortTCP: (message.sendPort as? RLSocketPort)?.tcpPort,
                                receivedOnSelf: message.receivePort === owner))
    }
}

/// A socket port subclass, as a program may make (Foundation's is open).
final class NamedSocketPort: RLSocketPort, @unchecked Sendable {
    let name: String
    init(name: String) throws(RLError) {
        self.name = name
        try super.init(listeningOnTCPPort: 0, family: .ipv4, address: "127.0.0.1")
    }
}

@Suite struct SocketPortTests {
    @Test func localAndRemoteForms() throws {
        let local = try #require(RLSocketPort(tcpPort: 0))
        #expect(local.isValid)
        #expect(!local.isRemote)
        #expect(local.tcpPort != 0)
        #expect(local.protocolFamily == AF_INET)
        #expect(local.socketType == sockStream)
        #expect(local.protocol == tcpProto)
        #expect(local.address == sockaddrIn(0, 0, 0, 0, port: local.tcpPort))
        #expect(local.reservedSpaceLength == 0)
        #expect(local.description.contains("RLSocketPort"))

        let remote = try #require(RLSocketPort(remoteWithTCPPort: local.tcpPort, host: "127.0.0.1"))
        #expect(remote.isRemote)
        #expect(remote.isValid)
        #expect(remote.tcpPort == local.tcpPort)
        #expect(remote.address == sockaddrIn(127, 0, 0, 1, port: local.tcpPort))
        // No host: this host's IPv4 loopback, as Foundation. The same
        // address is the same port: equal, same hash, not the same object.
        let twin = try #require(RLSocketPort(remoteWithTCPPort: local.tcpPort, host: nil))
        #expect(twin == remote)
        #expect(twin.hashValue == remote.hashValue)
        #expect(twin !== remote)
        #expect(twin != local)
        // From a socket address, as Foundation's designated initializers.
        let fromAddress = try #require(RLSocketPort(remoteWithProtocolFamily: AF_INET, socketType: sockStream,
                                                    protocol: tcpProto, address: remote.address))
        #expect(fromAddress == remote)
        let bound = try #require(RLSocketPort(protocolFamily: AF_INET, socketType: sockStream, protocol: tcpProto,
                                              address: sockaddrIn(127, 0, 0, 1, port: 0)))
        #expect(bound.tcpPort != 0)
        #expect(bound.address == sockaddrIn(127, 0, 0, 1, port: bound.tcpPort))
        // Any free port, and IPv6.
        let any = RLSocketPort()
        #expect(any.isValid && any.tcpPort != 0 && any.tcpPort != local.tcpPort)
        let six = try RLSocketPort(listeningOnTCPPort: 0, family: .ipv6, address: "::1")
        #expect(six.protocolFamily == AF_INET6)
        #expect(six.address.count == MemoryLayout<sockaddr_in6>.size)
        #expect(sockaddrPort(six.address) == six.tcpPort)
        for port in [local, any, bound, six] as [RLSocketPort] { port.invalidate() }
    }

    @Test func messagesReachTheDelegateInOrderWhateverTheirSize() throws {
        let server = SocketServer(try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1"))
        let delegate = RecordingDelegate()
        delegate.owner = server.port
        server.port.setDelegate(delegate)
        #expect(server.port.delegate() === delegate)
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: server.port.tcpPort)
        // Back to back, so several share a read; sizes from none to 1 MiB.
        let sizes = [0, 1, 11, 12, 100, 65_536, 1 << 20] + Array(repeating: 3, count: 200)
        for (i, size) in sizes.enumerated() {
            let parts: [RLPortComponent] = size == 0 ? [] : [.bytes(Array(repeating: UInt8(i % 251), count: size))]
            #expect(remote.send(before: RLTime.now + 10, msgid: i, components: parts, from: nil, reserved: 0))
        }
        #expect(loopEventually { delegate.seen.count == sizes.count })
        let seen = delegate.seen.values
        #expect(seen.map(\.msgid) == (0..<sizes.count).map { UInt32($0) })
        #expect(seen.map(\.parts) == sizes.enumerated().map { i, size in size == 0 ? [] : ["data:\(size):\(i % 251)"] })
        #expect(seen.allSatisfy { $0.receivedOnSelf && $0.sendPortTCP == nil })
        server.stop()
    }

    @Test func closureAndAsyncSequenceReceiversTakePrecedence() async throws {
        let port = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        let server = SocketServer(port)
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: port.tcpPort)
        let handled = LoopEventLog<UInt32>()
        port.setHandler { handled.append($0.msgid) }
        try remote.send([.bytes([1])], msgid: 1, before: RLTime.now + 10)
        #expect(loopEventually { handled.count == 1 })
        let messages = port.messages
        for i: UInt32 in 2...20 { try remote.send([.bytes([UInt8(i)])], msgid: i, before: RLTime.now + 10) }
        var ids: [UInt32] = []
        for await message in messages {
            ids.append(message.msgid)
            #expect(message.components?.first?.data == RLData([UInt8(message.msgid)]))
            #expect(message.receivePort === port)
            if ids.count == 19 { port.invalidate() }
        }
        // Reaching here means invalidation ended the sequence.
        #expect(ids == Array(2...20))
        #expect(handled.values == [1])
        server.stop()
    }

    /// As PortTests' test of the same name, for a socket port: messages
    /// the loop thread made and queued before the consumer asked for them.
    /// As PortTests' test of the same name, for a socket port (the case
    /// CI's ThreadSanitizer run reported): each message handed to a consumer
    /// that waits for it, one at a time.
    @Test func messagesHandedToAWaitingConsumerOneByOneAreWhole() async throws {
        let port = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        let messages = port.messages
        let server = SocketServer(port)
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: port.tcpPort)
        try await expectHandedOneByOne(messages, invalidating: port) { next in
            try remote.send([.bytes([UInt8(next % 256), 7])], msgid: next, before: RLTime.now + 10)
        }
        server.stop()
    }

    @Test func messagesQueuedBeforeTheConsumerAsksAreWholeWhenRead() async throws {
        let port = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        let messages = port.messages
        let server = SocketServer(port)
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: port.tcpPort)
        for i in 1...20 { try remote.send([.bytes([UInt8(i), 7])], msgid: UInt32(i), before: RLTime.now + 10) }
        usleep(200_000)  // the loop thread delivers them meanwhile (not needed to pass)
        await expectQueuedWhole(messages, receivedOn: port)
        server.stop()
    }

    @Test func repliesReachTheSendersPortThroughSendPort() throws {
        let server = SocketServer(try RLSocketPort(listeningOnTCPPort: 0))
        let answered = LoopEventLog<Bool>()
        server.port.setHandler { message in
            // Sending a received message answers it: to its sendPort, with
            // this port as the reply port.
            message.msgid += 1000
            answered.append(message.send(before: RLTime.now + 10))
        }
        let client = SocketServer(try RLSocketPort(listeningOnTCPPort: 0))
        let replies = RecordingDelegate()
        replies.owner = client.port
        client.port.setDelegate(replies)
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: server.port.tcpPort)
        for i in 1...5 {
            #expect(remote.send(before: RLTime.now + 10, msgid: i, components: [.bytes([UInt8(i), 9])],
                                from: client.port, reserved: 0))
        }
        // The server's handler records its answer after the send returns,
        // so the reply can reach the client first: wait for both.
        #expect(loopEventually { replies.seen.count == 5 && answered.count == 5 })
        #expect(answered.values == Array(repeating: true, count: 5))
        let seen = replies.seen.values
        #expect(seen.map(\.msgid) == (1001...1005).map { UInt32($0) })
        #expect(seen.map(\.parts) == (1...5).map { ["data:2:\($0)"] })
        #expect(seen.allSatisfy { $0.receivedOnSelf && $0.sendPortTCP == server.port.tcpPort })
        server.stop()
        client.stop()
    }

    @Test func portComponentsArriveAsRemotePortsForTheRouteTaken() throws {
        let server = SocketServer(try RLSocketPort(listeningOnTCPPort: 0))
        let carried = try RLSocketPort(listeningOnTCPPort: 0)  // every address: travels as "*:port"
        let carriedRemote = LoopSlot<RLSocketPort>()
        server.port.setHandler { message in
            if case .port(let port)? = message.components?.first, let socket = port as? RLSocketPort {
                carriedRemote.set(socket)
            }
        }
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: server.port.tcpPort)
        #expect(remote.send(before: RLTime.now + 10, msgid: 1, components: [.port(carried), .bytes([5])],
                            from: nil, reserved: 0))
        #expect(loopEventually { carriedRemote.value != nil })
        let arrived = try #require(carriedRemote.value)
        #expect(arrived.isRemote)
        // "*" became the address the connection came from.
        #expect(arrived.address == sockaddrIn(127, 0, 0, 1, port: carried.tcpPort))
        // A local RLPort cannot travel over TCP.
        let plain = RLPort()
        #expect(!remote.send(before: RLTime.now + 1, msgid: 2, components: [.port(plain)], from: nil, reserved: 0))
        #expect(lastCode == .invalidObject)
        plain.invalidate()
        carried.invalidate()
        server.stop()
    }

    /// The guide's check-in protocol with socket ports: the worker is handed
    /// the main thread's port object itself and sends through it.
    @Test func checkInThroughTheLocalPortObject() throws {
        let main = SocketServer(try RLSocketPort(listeningOnTCPPort: 0))
        let workerPort = LoopSlot<RLSocketPort>()
        let results = LoopEventLog<UInt8>()
        main.port.setHandler { message in
            switch message.msgid {
            case 100: if let sender = message.sendPort as? RLSocketPort { workerPort.set(sender) }
            case 102: if let value = message.components?.first?.data?.first { results.append(value) }
            default: break
            }
        }
        let mainPort = main.port
        let quit = LoopSlot<Bool>()
        let worker = RunLoopTestThread {
            guard let mine = try? NamedSocketPort(name: "worker") else { return }
            mine.setHandler { message in
                switch message.msgid {
                case 101:
                    let n = message.components?.first?.data?.first ?? 0
                    _ = message.sendPort?.send(before: RLTime.now + 10, msgid: 102, components: [.bytes([n * n])],
                                               from: mine, reserved: 0)
                case 103: quit.set(true)
                default: break
                }
            }
            RLRunLoop.current.add(mine, forMode: .default)
            let checkIn = RLPortMessage(sendPort: mainPort, receivePort: mine, components: nil)
            checkIn.msgid = 100
            guard checkIn.send(before: RLTime.now + 10) else { return }
            let deadline = RLTime.now + 30
            while quit.value == nil && RLTime.now < deadline {
                _ = RLRunLoop.current.run(mode: .default, before: RLTime.now + 0.5)
            }
            mine.invalidate()
        }
        #expect(loopEventually { workerPort.value != nil })
        let toWorker = try #require(workerPort.value)
        for n: UInt8 in 1...5 {
            #expect(toWorker.send(before: RLTime.now + 10, msgid: 101, components: [.bytes([n])], from: main.port,
                                  reserved: 0))
        }
        #expect(loopEventually { results.count == 5 })
        #expect(results.values == [1, 4, 9, 16, 25])
        #expect(toWorker.send(before: RLTime.now + 10, msgid: 103, components: nil, from: nil, reserved: 0))
        worker.join()
        main.stop()
    }

    @Test func subclassesArriveAsThemselvesAndHandlerInitIsInherited() throws {
        let named = try NamedSocketPort(name: "mine")
        let server = SocketServer(named)
        let seenSelf = LoopSlot<String>()
        named.setHandler { message in seenSelf.set((message.receivePort as? NamedSocketPort)?.name ?? "other") }
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: named.tcpPort)
        #expect(remote.send(before: RLTime.now + 10, components: nil, from: nil, reserved: 0))
        #expect(loopEventually { seenSelf.value != nil })
        #expect(seenSelf.value == "mine")
        server.stop()
        // RLPort's closure initializer, inherited: a local port on any port.
        let withHandler = RLSocketPort { _ in }
        #expect(withHandler.isValid && !withHandler.isRemote && withHandler.tcpPort != 0)
        withHandler.invalidate()
    }

    @Test func overIPv6() throws {
        let server = SocketServer(try RLSocketPort(listeningOnTCPPort: 0, family: .ipv6, address: "::1"))
        let got = LoopSlot<[UInt8]>()
        server.port.setHandler { got.set($0.components?.first?.data.map(Array.init) ?? []) }
        let remote = try RLSocketPort(remoteHost: "::1", tcpPort: server.port.tcpPort)
        #expect(remote.protocolFamily == AF_INET6)
        try remote.send([.bytes([6, 6])], msgid: 6, before: RLTime.now + 10)
        #expect(loopEventually { got.value != nil })
        #expect(got.value == [6, 6])
        server.stop()
    }

    // MARK: Invalidation

    @Test func invalidationTellsOnceFreesTheTCPPortAndInvalidatesSenders() throws {
        let local = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        let server = SocketServer(local)
        let tcp = local.tcpPort
        let localCalls = LoopEventLog<Bool>()
        local.setInvalidationHandler { port in localCalls.append(port === local && !port.isValid) }
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: tcp)
        let got = LoopEventLog<UInt32>()
        local.setHandler { got.append($0.msgid) }
        try remote.send(msgid: 1, before: RLTime.now + 10)
        #expect(loopEventually { got.count == 1 })
        let remoteCalls = LoopEventLog<Bool>()
        remote.setInvalidationHandler { port in remoteCalls.append(port == remote) }

        local.invalidate()
        local.invalidate()
        #expect(!local.isValid)
        #expect(localCalls.values == [true])
        #expect(!server.loop.contains(local, forMode: .default))
        // The TCP port is free at once.
        let again = try #require(RLSocketPort(tcpPort: tcp))
        again.invalidate()
        // The sender hears of it at its next send: that send fails and the
        // remote port becomes invalid.
        #expect(!remote.send(before: RLTime.now + 5, msgid: 2, components: nil, from: nil, reserved: 0))
        #expect([RLError.Code.notFound, .invalidState].contains(lastCode))
        #expect(!remote.isValid)
        #expect(remoteCalls.values == [true])
        // Set on an invalid port, the handler is called at once.
        local.setInvalidationHandler { _ in localCalls.append(true) }
        #expect(localCalls.count == 2)
        // A new remote port for the address may be made (and is valid).
        let fresh = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: tcp)
        #expect(fresh.isValid && fresh != remote)
        server.stop()
    }

    @Test func remotePortsAreSharedAndDroppingTheLastReferenceInvalidates() throws {
        let local = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        let calls = LoopEventLog<Bool>()
        do {
            let a = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: local.tcpPort)
            let b = try #require(RLSocketPort(remoteWithTCPPort: local.tcpPort, host: "127.0.0.1"))
            // One C port, so one invalidation handler (the last one set).
            b.setInvalidationHandler { port in calls.append(!port.isValid) }
            a.invalidate()
            #expect(!a.isValid && !b.isValid)
        }
        #expect(calls.values == [true])
        do {
            let unadded = try RLSocketPort(listeningOnTCPPort: 0)
            unadded.setInvalidationHandler { port in calls.append(!port.isValid) }
        }
        #expect(calls.values == [true, true])
        local.invalidate()
    }

    // MARK: Misuse

    @Test func misuseFailsClearly() throws {
        let local = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        // The TCP port is taken.
        #expect(RLSocketPort(protocolFamily: AF_INET, socketType: sockStream, protocol: tcpProto,
                             address: local.address) == nil)
        #expect(lastCode == .exists)
        #expect(throws: RLError.self) { try RLSocketPort(listeningOnTCPPort: local.tcpPort, address: "127.0.0.1") }
        #expect(lastCode == .exists)
        // Bad addresses, hosts, ports and socket kinds.
        #expect(throws: RLError.self) { try RLSocketPort(listeningOnTCPPort: 0, address: "not-an-address") }
        #expect(lastCode == .invalidArgument)
        #expect(throws: RLError.self) { try RLSocketPort(listeningOnTCPPort: 0, family: .ipv4, address: "::1") }
        #expect(RLSocketPort(remoteWithTCPPort: 0, host: "127.0.0.1") == nil)
        #expect(lastCode == .invalidArgument)
        #expect(throws: RLError.self) { try RLSocketPort(remoteHost: "", tcpPort: 80) }
        #expect(lastCode == .invalidArgument)
        #expect(throws: RLError.self) { try RLSocketPort(remoteHost: "no-such-host.invalid", tcpPort: 80) }
        #expect(lastCode == .notFound)
        #expect(throws: RLError.self) { try RLSocketPort(remoteHost: "a\u{0}b", tcpPort: 80) }
        let dgram = Int32(SOCK_DGRAM.rawValue)
        let good = sockaddrIn(127, 0, 0, 1, port: 0)
        #expect(RLSocketPort(protocolFamily: AF_INET, socketType: dgram, protocol: 0, address: good) == nil)
        #expect(RLSocketPort(protocolFamily: AF_INET6, socketType: sockStream, protocol: tcpProto, address: good) == nil)
        #expect(RLSocketPort(protocolFamily: AF_INET, socketType: sockStream, protocol: tcpProto,
                             address: Array(good.prefix(6))) == nil)
        #expect(RLSocketPort(remoteWithProtocolFamily: AF_INET, socketType: sockStream, protocol: tcpProto,
                             address: [1]) == nil)
        #expect(RLSocketPort(remoteWithProtocolFamily: AF_INET, socketType: sockStream, protocol: tcpProto,
                             address: good) == nil)  // TCP port 0
        // A socket port has no queue of its own.
        #expect(throws: RLError.self) { try local.setQueueLimit(10) }
        #expect(local.queuedCount == 0)
        // Limits.
        #expect(throws: RLError.self) { try local.setMessageLimit(10) }
        #expect(lastCode == .invalidArgument)
        #expect(throws: RLError.self) { try local.setStallTimeout(0) }
        #expect(lastCode == .invalidArgument)
        try local.setStallTimeout(2)
        let remote = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: local.tcpPort)
        #expect(throws: RLError.self) { try remote.setStallTimeout(1) }
        #expect(lastCode == .invalidState)
        try remote.setMessageLimit(64)
        #expect(!remote.send(before: RLTime.now + 1, msgid: 1, components: [.bytes(Array(repeating: 0, count: 100))],
                             from: nil, reserved: 0))
        #expect(lastCode == .invalidArgument)
        #expect(throws: RLError.self) { try remote.send(msgid: 1, before: .nan) }
        #expect(lastCode == .invalidArgument)
        // A local RLPort is no reply port for a socket port.
        let plain = RLPort()
        #expect(!remote.send(before: RLTime.now + 1, msgid: 1, components: nil, from: plain, reserved: 0))
        #expect(lastCode == .invalidObject)
        plain.invalidate()
        // Run loops: a remote port has no source; removing a port never
        // added is harmless; an invalid port cannot be added.
        let (addedRemote, removedUnadded, containsUnadded, addedInvalid) = onFreshLoopThread {
            () -> (Bool, Bool, Bool, Bool) in
            let loop = RLRunLoop.current
            let a = loop.add(remote, forMode: .default)
            let r = loop.remove(local, forMode: .default)
            let c = loop.contains(local, forMode: .default)
            let dead = RLSocketPort()
            dead.invalidate()
            return (a, r, c, loop.add(dead, forMode: .default))
        }
        #expect(!addedRemote && removedUnadded && !containsUnadded && !addedInvalid)
        // Sending through an invalid port.
        remote.invalidate()
        #expect(!remote.send(before: RLTime.now + 1, msgid: 1, components: nil, from: nil, reserved: 0))
        #expect(lastCode == .invalidObject)
        local.invalidate()
        #expect(!local.send(before: RLTime.now + 1, msgid: 1, components: nil, from: nil, reserved: 0))
    }

    @Test func maxComponentsCapsWhatARemoteSendsAndALocalTakes() throws {
        let server = SocketServer(try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1"))
        let delegate = RecordingDelegate()
        delegate.owner = server.port
        server.port.setDelegate(delegate)
        #expect(server.port.maxComponents == RLSocketPort.defaultMaxComponents)
        // Out of range: refused, the limit unchanged.
        #expect(throws: RLError.self) { try server.port.setMaxComponents(-1) }
        #expect(lastCode == .invalidArgument)
        #expect(throws: RLError.self) {
            try server.port.setMaxComponents(RLSocketPort.maxComponentsLimit + 1)
        }
        #expect(lastCode == .invalidArgument)
        #expect(server.port.maxComponents == RLSocketPort.defaultMaxComponents)
        try server.port.setMaxComponents(2)
        #expect(server.port.maxComponents == 2)
        let three: [RLPortComponent] = [.bytes([1]), .bytes([2]), .bytes([3])]
        let two: [RLPortComponent] = [.bytes([1]), .bytes([2])]
        // A remote port with the cap refuses to send more, and sends nothing.
        let capped = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: server.port.tcpPort)
        try capped.setMaxComponents(2)
        #expect(throws: RLError.self) { try capped.send(three, msgid: 1, before: RLTime.now + 10) }
        #expect(lastCode == .invalidArgument)
        try capped.send(two, msgid: 2, before: RLTime.now + 10)
        #expect(loopEventually { delegate.seen.count == 1 })
        #expect(delegate.seen.values.map(\.msgid) == [2])
        // Every wrapper of the remote port sees its limit; raising it lets
        // the same message go, and the local port drops it with the
        // connection: the sender's next send fails.
        let again = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: server.port.tcpPort)
        #expect(again.maxComponents == 2)
        try capped.setMaxComponents(3)
        #expect(again.maxComponents == 3)
        try capped.send(three, msgid: 3, before: RLTime.now + 10)
        #expect(loopEventually {
            (try? capped.send(two, msgid: 4, before: RLTime.now + 10)) == nil
        })
        #expect(!delegate.seen.values.map(\.msgid).contains(3))
        // A fresh remote port gets messages within the cap through again.
        capped.invalidate()
        let fresh = try RLSocketPort(remoteHost: "127.0.0.1", tcpPort: server.port.tcpPort)
        try fresh.send(two, msgid: 5, before: RLTime.now + 10)
        #expect(loopEventually { delegate.seen.values.map(\.msgid).contains(5) })
        #expect(!delegate.seen.values.map(\.msgid).contains(3))
        // An invalidated port takes a limit in range (to no effect).
        fresh.invalidate()
        try fresh.setMaxComponents(0)
        server.stop()
    }

    @Test func scheduleAndRemoveAreFoundationsForms() throws {
        let port = try RLSocketPort(listeningOnTCPPort: 0, address: "127.0.0.1")
        let (inAfterSchedule, inAfterRemove) = onFreshLoopThread { () -> (Bool, Bool) in
            let loop = RLRunLoop.current
            port.schedule(in: loop, forMode: testCustomMode)
            let a = loop.contains(port, forMode: testCustomMode)
            port.remove(from: loop, forMode: testCustomMode)
            return (a, loop.contains(port, forMode: testCustomMode))
        }
        #expect(inAfterSchedule)
        #expect(!inAfterRemove)
        port.invalidate()
    }
}
