import Foundation
import Testing
@testable import SwiftThreads
import SwiftThreadsFoundation
#if canImport(Glibc)
import Glibc
#endif

// RLSocketPort against Foundation's own SocketPort (swift-corelibs-foundation
// ships one on Linux): each scenario is written once, against a small
// interface both sides implement, run on a fresh thread with that side's own
// run loop, and its observable results compared.
//
// Foundation's SocketPort on Linux is broken in ways this suite keeps out of
// the compared scenarios (messages there are at least 12 bytes of component
// data, under 64 KB, and one at a time), and does not assert; each is listed
// in docs/swift-mapping.md ("Foundation's SocketPort on Linux"):
// - a message shorter than 52 bytes on the wire (components under 12 bytes
//   of data) is dropped without a word (`knownIssueSmallMessagesAreDropped`);
// - a message larger than one read (about 64 KB) is dropped
//   (`knownIssueLargeMessagesAreDropped`);
// - two messages that arrive in one read crash the receiving process (an
//   index trap in its Data slicing): not run here, it would end the test
//   process; ours: `SocketPortTests.messagesReachTheDelegateInOrderWhateverTheirSize`;
// - the `from:` port of a send never reaches the receiver: the message's
//   `sendPort` names the receiver's own TCP port at the sender's address, so
//   a reply goes back to the receiver (`knownIssueRepliesDoNotReachTheSender`);
// - invalidating a local port that is still in a run loop crashes the
//   process (the run loop's invalidation observer hashes the port after its
//   state is gone): the scenarios remove the port first;
// - sending through a remote port after `invalidate()` crashes (a nil
//   force-unwrap); another remote object for the same address stays valid.

/// One component, as a scenario writes it.
enum DiffPart<P> {
    case bytes([UInt8])
    case port(P)
}

/// What a receiver saw of one message, the same way for both sides.
struct DiffSeen: Sendable, Equatable, CustomStringConvertible {
    var msgid: UInt32
    var parts: [String]
    var sendPortTCP: UInt16?
    var onSelf: Bool
    var description: String { "#\(msgid) \(parts) sendPort=\(sendPortTCP.map(String.init) ?? "nil") onSelf=\(onSelf)" }
}

/// Data as text: its bytes when short, else its size and first byte.
func diffDescribe(bytes: [UInt8]) -> String {
    bytes.count <= 32 ? "data\(bytes)" : "data(\(bytes.count) x \(bytes.first ?? 0))"
}

/// The operations a scenario uses, for Foundation's SocketPort and ours.
protocol SocketPortSide {
    associatedtype P: AnyObject & Hashable
    static var name: String { get }
    static func local(tcpPort: UInt16) -> P?
    static func remote(tcpPort: UInt16, host: String?) -> P?
    static func isValid(_ port: P) -> Bool
    static func address(_ port: P) -> [UInt8]
    static func kind(_ port: P) -> [Int32]
    /// Sets a delegate recording into `log` (kept by the returned token)
    /// and adds the port to this thread's run loop.
    static func listen(_ port: P, into log: LoopEventLog<DiffSeen>) -> AnyObject
    static func unlisten(_ port: P)
    static func setDelegate(_ port: P, _ token: AnyObject?)
    static func runLoop(for seconds: Double)
    static func send(_ port: P, msgid: Int?, parts: [DiffPart<P>], from: P?) -> Bool
    static func invalidate(_ port: P)
    /// Counts the port's invalidation signals into `log` (Foundation: its
    /// notification; ours: the handler); the token keeps the watch.
    static func watchInvalidation(_ port: P, _ log: LoopEventLog<Bool>) -> AnyObject
}

extension SocketPortSide {
    static func tcpPort(_ port: P) -> UInt16 { sockaddrPort(address(port)) }

    /// Runs this thread's loop until `log` has `count` entries (a generous
    /// bound; a scenario that expects nothing runs it for a short while).
    static func receive(_ log: LoopEventLog<DiffSeen>, count: Int, within seconds: Double = 10) {
        let deadline = RLTime.now + seconds
        while log.count < count && RLTime.now < deadline { runLoop(for: 0.02) }
    }
}

// MARK: Foundation's side

final class FoundationRecorder: NSObject, PortDelegate, @unchecked Sendable {
    let log: LoopEventLog<DiffSeen>
    weak var owner: SocketPort?
    init(_ log: LoopEventLog<DiffSeen>, owner: SocketPort) {
        self.log = log
        self.owner = owner
    }
    func handle(_ message: PortMessage) {
        let parts = (message.components ?? []).map { part -> String in
            if let data = part as? Data { return diffDescribe(bytes: [UInt8](data)) }
            if let port = part as? SocketPort { return "port:\(FoundationSide.tcpPort(port))" }
            return "?"
        }
        log.append(DiffSeen(msgid: message.msgid, parts: parts,
                            sendPortTCP: (message.sendPort as? SocketPort).map(FoundationSide.tcpPort),
                            onSelf: message.receivePort === owner))
    }
}

final class NotificationToken: @unchecked Sendable {
    let observer: NSObjectProtocol
    init(_ observer: NSObjectProtocol) { self.observer = observer }
    deinit { NotificationCenter.default.removeObserver(observer) }
}

enum FoundationSide: SocketPortSide {
    typealias P = SocketPort
    static let name = "Foundation.SocketPort"
    static func local(tcpPort: UInt16) -> SocketPort? { SocketPort(tcpPort: tcpPort) }
    static func remote(tcpPort: UInt16, host: String?) -> SocketPort? {
        SocketPort(remoteWithTCPPort: tcpPort, host: host)
    }
    static func isValid(_ port: SocketPort) -> Bool { port.isValid }
    static func address(_ port: SocketPort) -> [UInt8] { [UInt8](port.address) }
    static func kind(_ port: SocketPort) -> [Int32] { [port.protocolFamily, port.socketType, port.protocol] }
    static func listen(_ port: SocketPort, into log: LoopEventLog<DiffSeen>) -> AnyObject {
        let recorder = FoundationRecorder(log, owner: port)
        port.setDelegate(recorder)
        RunLoop.current.add(port, forMode: .default)
        return recorder
    }
    static func unlisten(_ port: SocketPort) { RunLoop.current.remove(port, forMode: .default) }
    static func setDelegate(_ port: SocketPort, _ token: AnyObject?) { port.setDelegate(token as? PortDelegate) }
    static func runLoop(for seconds: Double) {
        _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: seconds))
    }
    static func send(_ port: SocketPort, msgid: Int?, parts: [DiffPart<SocketPort>], from: SocketPort?) -> Bool {
        let objects: [Any] = parts.map { part -> Any in
            switch part {
            case .bytes(let bytes): return Data(bytes)
            case .port(let port): return port
            }
        }
        let date = Date(timeIntervalSinceNow: 10)
        if let msgid {
            return port.send(before: date, msgid: msgid, components: NSMutableArray(array: objects), from: from,
                             reserved: 0)
        }
        return port.send(before: date, components: NSMutableArray(array: objects), from: from, reserved: 0)
    }
    static func invalidate(_ port: SocketPort) { port.invalidate() }
    static func watchInvalidation(_ port: SocketPort, _ log: LoopEventLog<Bool>) -> AnyObject {
        NotificationToken(NotificationCenter.default.addObserver(forName: Port.didBecomeInvalidNotification,
                                                                 object: port, queue: nil) { _ in log.append(true) })
    }
}

// MARK: Our side

final class OurRecorder: RLPortDelegate, @unchecked Sendable {
    let log: LoopEventLog<DiffSeen>
    weak var owner: RLSocketPort?
    init(_ log: LoopEventLog<DiffSeen>, owner: RLSocketPort) {
        self.log = log
        self.owner = owner
    }
    func handle(_ message: RLPortMessage) {
        let parts = (message.components ?? []).map { part -> String in
            switch part {
            case .data(let data): return diffDescribe(bytes: Array(data))
            case .port(let port): return (port as? RLSocketPort).map { "port:\($0.tcpPort)" } ?? "?"
            }
        }
        log.append(DiffSeen(msgid: message.msgid, parts: parts,
                            sendPortTCP: (message.sendPort as? RLSocketPort)?.tcpPort,
                            onSelf: message.receivePort === owner))
    }
}

enum OurSide: SocketPortSide {
    typealias P = RLSocketPort
    static let name = "RLSocketPort"
    static func local(tcpPort: UInt16) -> RLSocketPort? { RLSocketPort(tcpPort: tcpPort) }
    static func remote(tcpPort: UInt16, host: String?) -> RLSocketPort? {
        RLSocketPort(remoteWithTCPPort: tcpPort, host: host)
    }
    static func isValid(_ port: RLSocketPort) -> Bool { port.isValid }
    static func address(_ port: RLSocketPort) -> [UInt8] { port.address }
    static func kind(_ port: RLSocketPort) -> [Int32] { [port.protocolFamily, port.socketType, port.protocol] }
    static func listen(_ port: RLSocketPort, into log: LoopEventLog<DiffSeen>) -> AnyObject {
        let recorder = OurRecorder(log, owner: port)
        port.setDelegate(recorder)
        RLRunLoop.current.add(port, forMode: .default)
        return recorder
    }
    static func unlisten(_ port: RLSocketPort) { RLRunLoop.current.remove(port, forMode: .default) }
    static func setDelegate(_ port: RLSocketPort, _ token: AnyObject?) { port.setDelegate(token as? RLPortDelegate) }
    static func runLoop(for seconds: Double) { _ = RLRunLoop.current.run(mode: .default, before: RLTime.now + seconds) }
    static func send(_ port: RLSocketPort, msgid: Int?, parts: [DiffPart<RLSocketPort>], from: RLSocketPort?) -> Bool {
        let components: [RLPortComponent] = parts.map { part in
            switch part {
            case .bytes(let bytes): return .bytes(bytes)
            case .port(let port): return .port(port)
            }
        }
        let date = RLTime.now + 10
        if let msgid {
            return port.send(before: date, msgid: msgid, components: components, from: from, reserved: 0)
        }
        return port.send(before: date, components: components, from: from, reserved: 0)
    }
    static func invalidate(_ port: RLSocketPort) { port.invalidate() }
    static func watchInvalidation(_ port: RLSocketPort, _ log: LoopEventLog<Bool>) -> AnyObject {
        port.setInvalidationHandler { _ in log.append(true) }
        return port
    }
}

// MARK: Scenarios

/// A scenario's observable results, as lines of text.
typealias DiffTrace = [String]

enum SocketPortScenarios {
    static let payload = Array("sixteen bytes!!!".utf8)

    /// A local port on a free TCP port: its kind and address.
    static func creation<S: SocketPortSide>(_ side: S.Type) -> DiffTrace {
        guard let local = S.local(tcpPort: 0) else { return ["no local port"] }
        let address = S.address(local)
        let tcp = S.tcpPort(local)
        var trace = ["valid \(S.isValid(local))", "kind \(S.kind(local))", "address size \(address.count)",
                     "address \(address.prefix(2) + address.dropFirst(4))", "port in address \(tcp != 0)"]
        // A second local port on the same TCP port fails.
        trace.append("second on the same TCP port: \(S.local(tcpPort: tcp) == nil ? "nil" : "made")")
        S.invalidate(local)
        return trace
    }

    /// The remote forms: their addresses and identity.
    static func remoteForms<S: SocketPortSide>(_ side: S.Type) -> DiffTrace {
        guard let local = S.local(tcpPort: 0) else { return ["no local port"] }
        let tcp = S.tcpPort(local)
        var trace: DiffTrace = []
        for host in ["127.0.0.1", nil, "localhost"] as [String?] {
            guard let remote = S.remote(tcpPort: tcp, host: host) else {
                trace.append("\(host ?? "nil"): nil")
                continue
            }
            trace.append("\(host ?? "nil"): valid \(S.isValid(remote)) kind \(S.kind(remote)) "
                         + "address is 127.0.0.1:port \(S.address(remote) == sockaddrIn(127, 0, 0, 1, port: tcp))")
        }
        if let a = S.remote(tcpPort: tcp, host: "127.0.0.1"), let b = S.remote(tcpPort: tcp, host: "127.0.0.1") {
            trace.append("twins equal \(a == b) same hash \(a.hashValue == b.hashValue) same object \(a === b)")
        }
        if let six = S.remote(tcpPort: tcp, host: "::1") {
            let address = S.address(six)
            trace.append("::1 address size \(address.count) family \(address.prefix(2)) port \(sockaddrPort(address) == tcp)")
        }
        trace.append("unresolvable: \(S.remote(tcpPort: tcp, host: "no-such-host.invalid") == nil ? "nil" : "made")")
        S.invalidate(local)
        return trace
    }

    /// Messages with a msgid and data components, one at a time, then a
    /// port component; each is received before the next is sent.
    static func messages<S: SocketPortSide>(_ side: S.Type) -> DiffTrace {
        guard let local = S.local(tcpPort: 0), let remote = S.remote(tcpPort: S.tcpPort(local), host: "127.0.0.1"),
              let carried = S.local(tcpPort: 0) else { return ["no ports"] }
        let log = LoopEventLog<DiffSeen>()
        let token = S.listen(local, into: log)
        var trace: DiffTrace = []
        let sends: [(Int?, [DiffPart<S.P>])] = [
            (42, [.bytes(payload), .bytes(Array(repeating: 7, count: 1000))]),
            (Int(UInt32.max), [.bytes(payload)]),
            (nil, [.bytes(payload)]),  // the msgid-less form: 0
            (7, [.port(carried), .bytes(payload)]),
        ] + (1...5).map { (Int($0), [DiffPart<S.P>.bytes(Array(repeating: UInt8($0), count: 20))]) }
        for (i, send) in sends.enumerated() {
            trace.append("send \(i): \(S.send(remote, msgid: send.0, parts: send.1, from: nil))")
            S.receive(log, count: i + 1)
        }
        for seen in log.values {
            // The port a message names as its sender is not compared here
            // (Foundation's is a bug; see knownIssueRepliesDoNotReachTheSender).
            var shown = seen
            shown.sendPortTCP = nil
            trace.append("received \(shown)")
        }
        // A carried port arrives naming the carried port's TCP port.
        trace = trace.map { $0.replacingOccurrences(of: "port:\(S.tcpPort(carried))", with: "port:<carried>") }
        S.unlisten(local)
        withExtendedLifetime(token) {}
        S.invalidate(local)
        S.invalidate(carried)
        return trace
    }

    /// A port without a delegate drops what it receives; sending through the
    /// local port object itself reaches it.
    static func delegatesAndSelfSends<S: SocketPortSide>(_ side: S.Type) -> DiffTrace {
        guard let local = S.local(tcpPort: 0), let remote = S.remote(tcpPort: S.tcpPort(local), host: "127.0.0.1")
        else { return ["no ports"] }
        let log = LoopEventLog<DiffSeen>()
        let token = S.listen(local, into: log)
        S.setDelegate(local, nil)
        var trace = ["send without delegate: \(S.send(remote, msgid: 1, parts: [.bytes(payload)], from: nil))"]
        S.receive(log, count: 1, within: 0.3)
        S.setDelegate(local, token)
        trace.append("send with delegate: \(S.send(remote, msgid: 2, parts: [.bytes(payload)], from: nil))")
        S.receive(log, count: 1)
        trace.append("send to the local object: \(S.send(local, msgid: 3, parts: [.bytes(payload)], from: nil))")
        S.receive(log, count: 2)
        trace.append("received \(log.values.map(\.msgid)) on self \(log.values.map(\.onSelf))")
        S.unlisten(local)
        S.invalidate(local)
        return trace
    }

    /// Invalidation: validity, one signal, sends where nobody listens.
    static func invalidation<S: SocketPortSide>(_ side: S.Type) -> DiffTrace {
        guard let local = S.local(tcpPort: 0), let remote = S.remote(tcpPort: S.tcpPort(local), host: "127.0.0.1")
        else { return ["no ports"] }
        let signals = LoopEventLog<Bool>()
        let watch = S.watchInvalidation(local, signals)
        let log = LoopEventLog<DiffSeen>()
        let token = S.listen(local, into: log)
        var trace = ["send: \(S.send(remote, msgid: 1, parts: [.bytes(payload)], from: nil))"]
        S.receive(log, count: 1)
        trace.append("received \(log.count)")
        // Foundation crashes if a port in a run loop is invalidated.
        S.unlisten(local)
        S.invalidate(local)
        S.invalidate(local)
        trace.append("local valid after invalidate: \(S.isValid(local)), signals \(signals.count)")
        S.invalidate(remote)
        trace.append("remote valid after invalidate: \(S.isValid(remote))")
        // Nobody listens on TCP port 1.
        if let nobody = S.remote(tcpPort: 1, host: "127.0.0.1") {
            trace.append("send to nobody: \(S.send(nobody, msgid: 1, parts: [.bytes(payload)], from: nil))")
        }
        withExtendedLifetime((watch, token)) {}
        return trace
    }

    /// A message with one short component (under 12 bytes of data).
    static func smallMessage<S: SocketPortSide>(_ side: S.Type) -> [DiffSeen] {
        exchange(side, parts: [.bytes([1, 2, 3])], from: false)
    }

    /// A message with one 100 KB component.
    static func largeMessage<S: SocketPortSide>(_ side: S.Type) -> [DiffSeen] {
        exchange(side, parts: [.bytes(Array(repeating: 9, count: 100_000))], from: false)
    }

    /// A message sent with a reply port: the receiver's `sendPort` must
    /// name it (its TCP port is compared).
    static func replyPort<S: SocketPortSide>(_ side: S.Type) -> (seen: [DiffSeen], replyTCP: UInt16) {
        var replyTCP: UInt16 = 0
        let seen = exchange(side, parts: [.bytes(payload)], from: true) { replyTCP = $0 }
        return (seen, replyTCP)
    }

    private static func exchange<S: SocketPortSide>(_ side: S.Type, parts: [DiffPart<S.P>], from: Bool,
                                                    replyTCP: (UInt16) -> Void = { _ in }) -> [DiffSeen] {
        guard let local = S.local(tcpPort: 0), let remote = S.remote(tcpPort: S.tcpPort(local), host: "127.0.0.1"),
              let reply = S.local(tcpPort: 0) else { return [] }
        replyTCP(S.tcpPort(reply))
        let log = LoopEventLog<DiffSeen>()
        let token = S.listen(local, into: log)
        _ = S.send(remote, msgid: 5, parts: parts, from: from ? reply : nil)
        S.receive(log, count: 1, within: 1)
        S.unlisten(local)
        withExtendedLifetime(token) {}
        S.invalidate(local)
        S.invalidate(reply)
        return log.values
    }
}

/// Runs a scenario on a fresh thread (its own run loops).
private func onItsOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T { onFreshLoopThread(body) }

/// The Foundation runs share the process-wide state of Foundation's sockets
/// (a manager thread, a registry of remote ports): one at a time.
@Suite(.serialized) struct SocketPortDifferentialTests {
    @Test func creationOnATCPPort() {
        let ours = onItsOwnThread { SocketPortScenarios.creation(OurSide.self) }
        let theirs = onItsOwnThread { SocketPortScenarios.creation(FoundationSide.self) }
        #expect(ours == theirs)
        #expect(ours.first == "valid true")
    }

    @Test func remoteForms() {
        let ours = onItsOwnThread { SocketPortScenarios.remoteForms(OurSide.self) }
        let theirs = onItsOwnThread { SocketPortScenarios.remoteForms(FoundationSide.self) }
        #expect(ours == theirs)
        #expect(ours.contains("twins equal true same hash true same object false"))
    }

    @Test func messagesWithComponentsAndMsgids() {
        let ours = onItsOwnThread { SocketPortScenarios.messages(OurSide.self) }
        let theirs = onItsOwnThread { SocketPortScenarios.messages(FoundationSide.self) }
        #expect(ours == theirs)
        #expect(ours.filter { $0.hasPrefix("received") }.count == 9)
    }

    @Test func delegatesAndSendsToTheLocalObject() {
        let ours = onItsOwnThread { SocketPortScenarios.delegatesAndSelfSends(OurSide.self) }
        let theirs = onItsOwnThread { SocketPortScenarios.delegatesAndSelfSends(FoundationSide.self) }
        #expect(ours == theirs)
        #expect(ours.last == "received [2, 3] on self [true, true]")
    }

    @Test func invalidation() {
        let ours = onItsOwnThread { SocketPortScenarios.invalidation(OurSide.self) }
        let theirs = onItsOwnThread { SocketPortScenarios.invalidation(FoundationSide.self) }
        #expect(ours == theirs)
        #expect(ours.contains("local valid after invalidate: false, signals 1"))
    }

    // Where Foundation on Linux is broken: ours is asserted, Foundation's
    // failure is a known issue (not asserted: if Foundation is fixed, the
    // known issue simply stops occurring).

    @Test func knownIssueSmallMessagesAreDropped() {
        let expected = [DiffSeen(msgid: 5, parts: ["data[1, 2, 3]"], sendPortTCP: nil, onSelf: true)]
        #expect(onItsOwnThread { SocketPortScenarios.smallMessage(OurSide.self) } == expected)
        let theirs = onItsOwnThread { SocketPortScenarios.smallMessage(FoundationSide.self) }
        withKnownIssue("Foundation on Linux drops a message under 52 bytes on the wire", isIntermittent: true) {
            #expect(theirs == expected)
        }
    }

    @Test func knownIssueLargeMessagesAreDropped() {
        let expected = [DiffSeen(msgid: 5, parts: ["data(100000 x 9)"], sendPortTCP: nil, onSelf: true)]
        #expect(onItsOwnThread { SocketPortScenarios.largeMessage(OurSide.self) } == expected)
        let theirs = onItsOwnThread { SocketPortScenarios.largeMessage(FoundationSide.self) }
        withKnownIssue("Foundation on Linux drops a message larger than one read", isIntermittent: true) {
            #expect(theirs == expected)
        }
    }

    @Test func knownIssueRepliesDoNotReachTheSender() {
        let ours = onItsOwnThread { SocketPortScenarios.replyPort(OurSide.self) }
        #expect(ours.seen.map(\.sendPortTCP) == [ours.replyTCP])
        let theirs = onItsOwnThread { SocketPortScenarios.replyPort(FoundationSide.self) }
        withKnownIssue("Foundation on Linux ignores the from: port; sendPort names the receiver's own TCP port",
                       isIntermittent: true) {
            #expect(theirs.seen.map(\.sendPortTCP) == [theirs.replyTCP])
        }
    }

    /// Foundation code moves over by renaming: `Data` addresses and `Date`
    /// limits (SwiftThreadsFoundation).
    @Test func foundationTypesWorkThroughTheOverlay() throws {
        let got = onItsOwnThread { () -> [String] in
            guard let local = RLSocketPort(protocolFamily: PF_INET, socketType: Int32(SOCK_STREAM.rawValue),
                                           protocol: Int32(IPPROTO_TCP), address: Data(sockaddrIn(127, 0, 0, 1, port: 0))),
                  let remote = RLSocketPort(remoteWithProtocolFamily: PF_INET, socketType: Int32(SOCK_STREAM.rawValue),
                                            protocol: Int32(IPPROTO_TCP), address: local.addressData)
            else { return ["no ports"] }
            let log = LoopEventLog<DiffSeen>()
            let token = OurSide.listen(local, into: log)
            var out = ["sent \(remote.send(before: Date(timeIntervalSinceNow: 10), msgid: 4, components: [.bytes(Data([4, 2]))], from: nil, reserved: 0))"]
            let message = RLPortMessage(sendPort: remote, receivePort: nil, components: [.bytes(Data([5]))])
            message.msgid = 5
            out.append("message sent \(message.send(before: Date(timeIntervalSinceNow: 10)))")
            OurSide.receive(log, count: 2)
            out += log.values.map(\.description)
            withExtendedLifetime(token) {}
            local.invalidate()
            return out
        }
        #expect(got == ["sent true", "message sent true", "#4 [\"data[4, 2]\"] sendPort=nil onSelf=true",
                        "#5 [\"data[5]\"] sendPort=nil onSelf=true"])
    }
}
